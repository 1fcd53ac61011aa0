// The peer of dlock_redlock_bench: the redlock npm package (v5, ioredis) on
// the same masters.
//
//   node node_redlock_bench.js <install-dir> <host:port,...> <loops> <seconds>
//
// <install-dir> is where scripts/install-deps.sh ran `npm ci` for this
// directory's package-lock.json (BUILD_DIR/node_peer). One Redlock over one
// ioredis client per master, as redlock's README sets it up; <loops>
// concurrent async loops in this one process (node's way to run concurrent
// work), each taking and releasing a lock of its own (10 s lease, as dlock's
// pairs) for <seconds>. Prints "RATE <pairs per second>" and the acquire
// latency as "ACQUIRE_P50_US <n>" and "ACQUIRE_P99_US <n>"; exits non-zero
// when an acquire or release fails.
"use strict";

const path = require("path");
const { createRequire } = require("module");

const [installDir, hosts, loopsArg, secondsArg] = process.argv.slice(2);
if (!installDir || !hosts || !loopsArg || !secondsArg) {
  console.error(
    "usage: node node_redlock_bench.js <install-dir> <host:port,...> <loops> <seconds>");
  process.exit(2);
}
// The packages live in the build tree, not next to this file.
let Redis, Redlock;
try {
  const requireInstalled = createRequire(path.join(path.resolve(installDir), "package.json"));
  Redis = requireInstalled("ioredis").default;
  Redlock = requireInstalled("redlock").default;
} catch (e) {
  console.error(`redlock or ioredis is not installed in ${installDir}: ${e.message}`);
  process.exit(3);
}

const kLeaseMs = 10000;

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

async function main() {
  const loops = Number(loopsArg);
  const seconds = Number(secondsArg);
  const clients = hosts.split(",").map((hostPort) => {
    const [host, port] = hostPort.split(":");
    return new Redis({ host, port: Number(port), maxRetriesPerRequest: 1 });
  });
  await Promise.all(
    clients.map((c) => new Promise((resolve, reject) => {
      c.once("ready", resolve);
      c.once("error", reject);
    })));
  // Defaults (driftFactor 0.01, 10 retries 200 ms apart); an uncontended
  // acquire takes the first attempt.
  const redlock = new Redlock(clients);
  // Redlock emits every master's vote against, also when a quorum voted
  // for: a master can still be running the previous pair's release (its
  // EVALSHA fell back to EVAL) when the next acquire reaches it. Failures
  // without a quorum reject the acquire or release itself.
  let minorityVotesAgainst = 0;
  redlock.on("error", () => { ++minorityVotesAgainst; });

  const names = Array.from({ length: loops }, (_, i) => `node-bench-uncontended-${i}`);
  // One pair per loop before the clock starts: loads the scripts (EVALSHA
  // falls back to EVAL once per master).
  await Promise.all(names.map(async (name) => (await redlock.acquire([name], kLeaseMs)).release()));

  const latenciesNs = [];
  let pairs = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  await Promise.all(names.map(async (name) => {
    while (process.hrtime.bigint() < end) {
      const before = process.hrtime.bigint();
      const lock = await redlock.acquire([name], kLeaseMs);
      latenciesNs.push(Number(process.hrtime.bigint() - before));
      await lock.release();
      ++pairs;
    }
  }));
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  await Promise.all(clients.map((c) => c.quit()));

  latenciesNs.sort((a, b) => a - b);
  console.log(`RATE ${pairs / elapsedS}`);
  console.log(`ACQUIRE_P50_US ${percentile(latenciesNs, 50) / 1000}`);
  console.log(`ACQUIRE_P99_US ${percentile(latenciesNs, 99) / 1000}`);
  console.log(`MINORITY_VOTES_AGAINST ${minorityVotesAgainst}`);
}

main().catch((e) => {
  console.error(`node redlock benchmark failed: ${e.stack || e}`);
  process.exit(1);
});
