#!/usr/bin/env bash
# t_heal_stress.sh - the fast version of `make stress` (tests/stress/stress.sh): a few faults of every kind
# (flip, cut, truncate, stall, 500, 503, server restart), two helper kills at random moments, and disk full;
# every load heals, no wrong byte is served, nothing piles up in tmp/.
set -uo pipefail
STRESS_ATTACKS=0 STRESS_PILE_ROUNDS=0 STRESS_FAULTS=${STRESS_FAULTS:-2} STRESS_KILLS=${STRESS_KILLS:-2} STRESS_DISK_SIZES=${STRESS_DISK_SIZES:-4m 16m} bash "$HFS3_ROOT/tests/stress/stress.sh"
