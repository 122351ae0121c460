// s3server.js - start a real S3-compatible server (@20minutes/s3rver) on loopback.
// usage: node --openssl-legacy-provider scripts/s3server.js PORT DIR BUCKET[,BUCKET...]
// Prints "ready PORT" on stdout once it listens. Falls back to s3rver 3.7.1 on node < 20
// (that one does not verify signatures, so it says so on stderr).
'use strict';
const path = require('path');
const [port, dir, buckets] = process.argv.slice(2);
const major = parseInt(process.versions.node.split('.')[0], 10);
let S3rver;
if (major >= 20 && !process.env.S3ENV_LEGACY) {
  S3rver = require(path.join(__dirname, '..', 'node_modules', '@20minutes', 's3rver'));
} else {
  process.stderr.write('s3server: WARNING node ' + process.versions.node +
    (major >= 20 ? ' (S3ENV_LEGACY set)' : ' < 20') + ': using s3rver 3.7.1, which does NOT verify request signatures\n');
  process.stdout.write('legacy\n');
  S3rver = require(path.join(__dirname, 'legacy-s3rver', 'node_modules', 's3rver'));
}
const srv = new S3rver({
  address: '127.0.0.1', port: parseInt(port, 10), directory: dir, silent: true,
  configureBuckets: (buckets || 'models').split(',').map((name) => ({ name })),
});
srv.run().then((addr) => {
  const p = addr && addr.port ? addr.port : (Array.isArray(addr) ? addr[1] : port);
  process.stdout.write('ready ' + p + '\n');
}, (err) => { process.stderr.write('s3server: ' + err.message + '\n'); process.exit(1); });
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => srv.close().finally(() => process.exit(0)));
