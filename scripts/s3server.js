// s3server.js - start a real S3-compatible server (@20minutes/s3rver) on loopback.
// usage: node --openssl-legacy-provider scripts/s3server.js PORT DIR BUCKET[,BUCKET...]
// Prints "ready PORT" on stdout once it listens. Falls back to s3rver 3.7.1 on node < 20
// (that one does not verify signatures, so it says so on stderr).
// A ListObjectsV2 with a delimiter is answered here, not by s3rver, whose filesystem walk skips every folder more than
// one level below the prefix: a common prefix with no object directly inside it (an HF cache repo under a hub,
// where every object is in blobs/, refs/ or snapshots/) was never listed, where S3 lists it.
// S3ENV_MAX_KEYS=N: such a listing returns at most N keys and common prefixes together per page (default 1,000, as
// S3; s3rver alone never pages common prefixes), with its own continuation tokens.
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
const pageMax = parseInt(process.env.S3ENV_MAX_KEYS || '1000', 10);
if (pageMax > 0 && major >= 20 && !process.env.S3ENV_LEGACY) {
  const ctrl = require(path.join(__dirname, '..', 'node_modules', '@20minutes', 's3rver', 'lib', 'controllers', 'bucket'));
  const orig = ctrl.getBucket;
  ctrl.getBucket = async function getBucket(ctx) {
    if (ctx.query['list-type'] !== '2' || !ctx.query.delimiter) return orig.call(this, ctx);
    const prefix = ctx.query.prefix || '', delim = ctx.query.delimiter;
    const asked = ctx.query['max-keys'] ? parseInt(ctx.query['max-keys'], 10) : 1000;
    const max = Math.max(1, Math.min(pageMax, asked));
    const token = ctx.query['continuation-token'];
    const after = token ? Buffer.from(token, 'base64url').toString('utf8') : (ctx.query['start-after'] || '');
    const all = await ctx.store.listObjects(ctx.params.bucket, { prefix, maxKeys: Infinity });
    const objs = all.objects.slice().sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const items = [], seen = new Set();
    for (const o of objs) {
      const i = o.key.slice(prefix.length).indexOf(delim);
      if (i < 0) { items.push({ o }); continue; }
      const p = o.key.slice(0, prefix.length + i + delim.length);
      if (!seen.has(p)) { seen.add(p); items.push({ p }); }
    }
    const keyOf = (it) => (it.p !== undefined ? it.p : it.o.key);
    let start = 0;
    while (after && start < items.length && keyOf(items[start]) <= after) start++;
    const page = items.slice(start, start + max), truncated = start + max < items.length;
    ctx.body = {
      ListBucketResult: {
        '@': { xmlns: 'http://doc.s3.amazonaws.com/2006-03-01/' },
        Name: ctx.params.bucket, Prefix: prefix, ContinuationToken: token || undefined,
        NextContinuationToken: truncated ? Buffer.from(keyOf(page[page.length - 1])).toString('base64url') : undefined,
        KeyCount: page.length, MaxKeys: max, Delimiter: delim, IsTruncated: truncated,
        Contents: page.filter((it) => it.o).map(({ o }) => ({
          Key: o.key, LastModified: o.lastModifiedDate.toISOString(), ETag: o.metadata.etag, Size: o.size,
          StorageClass: 'STANDARD',
        })),
        CommonPrefixes: page.filter((it) => it.p !== undefined).map((it) => ({ Prefix: it.p })),
      },
    };
  };
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
