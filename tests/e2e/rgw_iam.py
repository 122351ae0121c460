#!/usr/bin/python3
"""rgw_iam.py - IAM set-up against RGW through botocore (Debian's python3-boto3): an OpenID Connect provider
and roles for the STS tests. Keys come from RGW_AK / RGW_SK, the endpoint from RGW_ENDPOINT.

  rgw_iam.py oidc URL CLIENT_ID THUMBPRINT        CreateOpenIDConnectProvider
  rgw_iam.py role NAME TRUST                      CreateRole with a trust policy: TRUST is "user:UID" (AssumeRole
                                                  by that RGW user) or "oidc:HOSTPORT" (web identity from that
                                                  provider); a role policy allows s3:* on every bucket. Prints the ARN.
RGW's policy parser wants compact JSON (a form-encoded '+' for a blank breaks it): separators without blanks.
"""
import json
import os
import sys

import boto3


def iam():
    return boto3.client("iam", endpoint_url=os.environ["RGW_ENDPOINT"], region_name="us-east-1",
                        aws_access_key_id=os.environ["RGW_AK"], aws_secret_access_key=os.environ["RGW_SK"])


def compact(o):
    return json.dumps(o, separators=(",", ":"))


def main():
    c = iam()
    if sys.argv[1] == "oidc":
        url, client, thumb = sys.argv[2:5]
        c.create_open_id_connect_provider(Url=url, ClientIDList=[client], ThumbprintList=[thumb])
    elif sys.argv[1] == "role":
        name, trust = sys.argv[2:4]
        kind, _, what = trust.partition(":")
        if kind == "user":
            st = {"Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam:::user/" + what]}, "Action": ["sts:AssumeRole"]}
        else:
            st = {"Effect": "Allow", "Principal": {"Federated": ["arn:aws:iam:::oidc-provider/" + what]},
                  "Action": ["sts:AssumeRoleWithWebIdentity"]}
        r = c.create_role(RoleName=name, Path="/", AssumeRolePolicyDocument=compact({"Version": "2012-10-17", "Statement": [st]}))
        c.put_role_policy(RoleName=name, PolicyName="all-s3", PolicyDocument=compact(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "arn:aws:s3:::*"}]}))
        print(r["Role"]["Arn"])


if __name__ == "__main__":
    main()
