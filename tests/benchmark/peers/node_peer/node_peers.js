// The node peers of the comparative report (scripts/bench_report.py) on one
// Redis master: redis-semaphore's Mutex and redlock, both over ioredis;
// redlock over ioredis's Cluster client on a Redis Cluster
// (ioredis-cluster-redlock, --target host:port,host:port,...); and,
// for dlock_etcd_bench --peers (not in the report yet), the etcd3 package's
// Lock on etcd (node-etcd3).
//
//   node node_peers.js <install-dir>
//       --library redis-semaphore|node-redlock|ioredis-cluster-redlock|node-etcd3
//       --target host:port --scenario uncontended|contention|semaphore
//       --concurrency N --seconds S [--warmup S] [--permits P]
//   node node_peers.js <install-dir> --serve [LIB]
//
// <install-dir> is where scripts/install-deps.sh ran `npm ci` for this
// directory's package-lock.json (BUILD_DIR/node_peer). Runs ONE slice and
// prints one JSON record, the shape `dlock bench --json` prints for dlock,
// with "library" where dlock's has "backend":
//
//   uncontended: N concurrent async loops in this process (node's way to run
//     concurrent work), each with a lock name of its own, acquire+release
//     pairs on one shared ioredis connection (redis-semaphore's README passes
//     one client to every Mutex; redlock's single-master setup is a Redlock
//     over one client): pairs_per_sec and the acquire and release
//     percentiles (us).
//   contention: N clients, each with an ioredis connection of its own (as N
//     processes would have), on one lock name, each re-acquiring as soon as
//     it released: hand-offs (the lock passing to another client) per
//     second, their latency (from the holder's release call to another
//     client's acquire returning), each client's share of the acquisitions,
//     Jain's index over them and the longest wait in acquire.
//   semaphore (redis-semaphore only): as uncontended, but every loop has a
//     Semaphore object of its own on ONE key with P permits (default N),
//     each taking one permit (lockTimeout 10 s) and giving it back: permits
//     per second, as `dlock bench --scenarios semaphore`.
//
// With `node node_peers.js <install-dir> --serve` instead, runs one slice per
// line of standard input, each line a JSON list of the arguments above, and
// prints each slice's record as it is done, until standard input closes: the
// report starts a process per library once instead of one per slice. LIB, if
// given, is loaded at once, before the first slice comes.
//
// Leases: both take a 10 s lock, as dlock's pairs ask for an explicit 10 s
// lease. redis-semaphore refreshes its lock on its own while it is held
// (every 0.8 x lockTimeout = 8 s), so a hold never expires; redlock's lock
// is not extended (acquire(), not using()), so it expires after 10 s.
// Non-default options: every ioredis client has maxRetriesPerRequest: 1 (a
// failed call fails the run rather than retrying); redis-semaphore's
// acquireTimeout is 600 s in contention (waiting for seven others must not
// fail), its default 10 s otherwise; redlock's retryCount is -1 in
// contention, so that an acquire waits as long as it takes rather than
// failing after 10 tries.
//
// Both libraries wait for a held lock by polling: redis-semaphore every
// 10 ms (its default retryInterval), redlock every 200 ms +- 100 ms (its
// default retryDelay and retryJitter). etcd3's Lock takes a lease of its own
// per acquisition (ttl 10 s, kept alive while held) and does not wait: it
// fails when the lock is held, and contention retries it every 10 ms, as
// redis-semaphore polls. Exits non-zero with a message when the packages are
// missing or a call fails.
"use strict";

const path = require("path");
const { createRequire } = require("module");

const kLeaseMs = 10000;  // as dlock's pairs: an explicit 10 s lease, no watchdog

function parseArgs(argv) {
  const [installDir, ...rest] = argv;
  const args = { installDir, warmup: 0.2 };
  for (let i = 0; i < rest.length; i += 2) {
    const key = rest[i].replace(/^--/, "");
    args[key] = rest[i + 1];
  }
  for (const required of ["library", "target", "scenario", "concurrency", "seconds"]) {
    if (args[required] === undefined) {
      console.error(
        "usage: node node_peers.js <install-dir> --library redis-semaphore|node-redlock|ioredis-cluster-redlock|node-etcd3 " +
        "--target host:port --scenario uncontended|contention --concurrency N --seconds S " +
        "[--warmup S]");
      process.exit(2);
    }
  }
  args.concurrency = Number(args.concurrency);
  args.seconds = Number(args.seconds);
  args.warmup = Number(args.warmup);
  args.permits = Number(args.permits || args.concurrency);
  return args;
}

function percentilesUs(samplesNs) {
  if (samplesNs.length === 0) return { p50: null, p99: null, p999: null };
  const sorted = Float64Array.from(samplesNs).sort();
  const at = (f) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * f))] / 1000;
  return { p50: at(0.5), p99: at(0.99), p999: at(0.999) };
}

function jain(counts) {
  const total = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  return squares ? (total * total) / (counts.length * squares) : 0;
}

const now = () => process.hrtime.bigint();

// The packages each library needs.
const kPackages = {
  "redis-semaphore": ["ioredis", "redis-semaphore"],
  "node-redlock": ["ioredis", "redlock"],
  "ioredis-cluster-redlock": ["ioredis", "redlock"],
  "node-etcd3": ["etcd3"],
};

// { connect(), lockFor(connection, name, contended) -> {acquire, release},
//   close(connection) }
function library(args) {
  // The packages live in the build tree, not next to this file.
  let requireInstalled;
  const packages = kPackages[args.library];
  if (packages === undefined) {
    console.error(`unknown library ${args.library}`);
    process.exit(2);
  }
  try {
    requireInstalled = createRequire(path.join(path.resolve(args.installDir), "package.json"));
    packages.forEach((p) => requireInstalled.resolve(p));
  } catch (e) {
    console.error(`${packages.join(" or ")} is not installed in ${args.installDir} ` +
                  `(scripts/install-deps.sh BUILD_DIR installs them): ${e.message}`);
    process.exit(3);
  }
  if (args.library === "node-etcd3") return etcd3(requireInstalled, args);
  const Redis = requireInstalled("ioredis").default;
  const open = () => {
    if (args.library !== "ioredis-cluster-redlock") {
      const [host, port] = args.target.split(":");
      return new Redis({ host, port: Number(port), maxRetriesPerRequest: 1 });
    }
    // ioredis's Cluster: the slot map from the seeds, a connection per master.
    const seeds = args.target.split(",").map((seed) => {
      const [host, port] = seed.split(":");
      return { host, port: Number(port) };
    });
    return new Redis.Cluster(seeds, { redisOptions: { maxRetriesPerRequest: 1 } });
  };
  const connect = async () => {
    const client = open();
    await new Promise((resolve, reject) => {
      client.once("ready", resolve);
      client.once("error", reject);
    });
    return client;
  };
  const close = (client) => client.quit();

  if (args.library === "redis-semaphore") {
    const { Mutex, Semaphore } = requireInstalled("redis-semaphore");
    return {
      connect,
      semaphoreFor(client, name, permits) {
        const semaphore = new Semaphore(client, name, permits, { lockTimeout: kLeaseMs });
        return { acquire: () => semaphore.acquire(), release: () => semaphore.release() };
      },
      lockFor(client, name, contended) {
        const mutex = new Mutex(client, name, {
          lockTimeout: kLeaseMs,
          // Waiting for seven others must not fail the run.
          acquireTimeout: contended ? 600000 : 10000,
        });
        return { acquire: () => mutex.acquire(), release: () => mutex.release() };
      },
      close,
    };
  }
  if (args.library === "node-redlock" || args.library === "ioredis-cluster-redlock") {
    const Redlock = requireInstalled("redlock").default;
    const redlocks = new Map();
    return {
      connect,
      lockFor(client, name, contended) {
        if (!redlocks.has(client)) {
          const redlock = new Redlock([client], contended ? { retryCount: -1 } : {});
          // Redlock also emits each failed attempt of an acquire that goes on
          // retrying; a failure of the call itself rejects its promise.
          redlock.on("error", () => {});
          redlocks.set(client, redlock);
        }
        const redlock = redlocks.get(client);
        let lock = null;
        return {
          acquire: async () => { lock = await redlock.acquire([name], kLeaseMs); },
          release: async () => { await lock.release(); lock = null; },
        };
      },
      close,
    };
  }
}

function etcd3(requireInstalled, args) {
  const { Etcd3, EtcdLockFailedError } = requireInstalled("etcd3");
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  return {
    async connect() {
      const client = new Etcd3({ hosts: args.target });
      await client.get("node-peer-connected").string();
      return client;
    },
    lockFor(client, name, contended) {
      let lock = null;
      return {
        acquire: async () => {
          for (;;) {
            lock = client.lock(name).ttl(kLeaseMs / 1000);
            try {
              await lock.acquire();
              return;
            } catch (e) {
              if (!contended || !(e instanceof EtcdLockFailedError)) throw e;
            }
            await sleep(10);
          }
        },
        release: async () => { await lock.release(); lock = null; },
      };
    },
    close: async (client) => client.close(),
  };
}

// lockOf(client, i): loop i's lock; a name of its own each by default.
async function uncontended(lib, args, prefix, lockOf) {
  const client = await lib.connect();
  const lockFor = lockOf || ((c, i) => lib.lockFor(c, `${prefix}-uncontended-${i}`, false));
  const locks = Array.from({ length: args.concurrency }, (_, i) => lockFor(client, i));
  const warmUntil = now() + BigInt(Math.round(args.warmup * 1e9));
  await Promise.all(locks.map(async (l) => {
    do {
      await l.acquire();
      await l.release();
    } while (now() < warmUntil);
  }));
  const acquires = [];
  const releases = [];
  let pairs = 0;
  const start = now();
  const stop = start + BigInt(Math.round(args.seconds * 1e9));
  await Promise.all(locks.map(async (l) => {
    while (now() < stop) {
      const t0 = now();
      await l.acquire();
      const t1 = now();
      await l.release();
      const t2 = now();
      acquires.push(Number(t1 - t0));
      releases.push(Number(t2 - t1));
      ++pairs;
    }
  }));
  const seconds = Number(now() - start) / 1e9;
  await lib.close(client);
  return {
    scenario: "uncontended",
    concurrency: args.concurrency,
    seconds,
    pairs_per_sec: pairs / seconds,
    acquire_us: percentilesUs(acquires),
    release_us: percentilesUs(releases),
  };
}

async function contention(lib, args, prefix) {
  const clients = await Promise.all(Array.from({ length: args.concurrency }, lib.connect));
  const name = `${prefix}-contended`;
  const locks = clients.map((c) => lib.lockFor(c, name, true));
  const counts = new Array(locks.length).fill(0);
  const handoffs = [];
  let longestWaitNs = 0;
  let releasedAt = null;
  let releasedBy = null;
  const measureFrom = now() + BigInt(Math.round(args.warmup * 1e9));
  const stop = measureFrom + BigInt(Math.round(args.seconds * 1e9));
  // As `dlock bench` counts: an acquisition counts by when it was obtained
  // (t1 in or after the measured window: a wait begun while warming up
  // counts), with its hand-off and its wait; a client starts no
  // acquisition after the window.
  await Promise.all(locks.map(async (l, i) => {
    for (let t0 = now(); t0 < stop; t0 = now()) {
      await l.acquire();
      const t1 = now();
      if (t1 >= measureFrom) {
        // A client re-taking its own lock is no hand-off.
        if (releasedBy !== null && releasedBy !== i) handoffs.push(Number(t1 - releasedAt));
        longestWaitNs = Math.max(longestWaitNs, Number(t1 - t0));
        ++counts[i];
      }
      releasedBy = i;
      releasedAt = now();
      await l.release();
    }
  }));
  const finished = now();
  const seconds = Number((finished > stop ? finished : stop) - measureFrom) / 1e9;
  await Promise.all(clients.map((c) => lib.close(c)));
  const total = counts.reduce((a, b) => a + b, 0);
  return {
    scenario: "contention",
    concurrency: args.concurrency,
    seconds,
    handoffs_per_sec: handoffs.length / seconds,
    handoff_us: percentilesUs(handoffs),
    shares: counts.map((c) => (total ? c / total : 0)),
    jain: jain(counts),
    longest_wait_ms: longestWaitNs / 1e6,
  };
}

let slices = 0;
let running = "node peer";  // what a failure message names

async function sliceRecord(argv) {
  const args = parseArgs(argv);
  running = `${args.library} ${args.scenario}`;
  const lib = library(args);
  // A prefix of its own per slice: slices never meet another's names.
  const prefix = `peer-${process.pid}-${Date.now()}-${++slices}`;
  let record;
  if (args.scenario === "uncontended") {
    record = await uncontended(lib, args, prefix);
  } else if (args.scenario === "contention") {
    record = await contention(lib, args, prefix);
  } else if (args.scenario === "semaphore" && lib.semaphoreFor) {
    const name = `${prefix}-semaphore`;
    record = await uncontended(lib, args, prefix,
                               (c) => lib.semaphoreFor(c, name, args.permits));
    record.scenario = "semaphore";
    record.permits = args.permits;
  } else {
    console.error(`unknown scenario ${args.scenario}`);
    process.exit(2);
  }
  return JSON.stringify({ library: args.library, target: args.target, ...record });
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv[1] !== "--serve") {
    console.log(await sliceRecord(argv));
    return;
  }
  // Loaded before the first slice comes.
  for (const name of argv.slice(2)) library({ installDir: argv[0], library: name, target: ":0" });
  // A failed slice exits as a single run does: the reader sees the output
  // end and the message on stderr.
  const lines = require("readline").createInterface({ input: process.stdin });
  for await (const line of lines) {
    const record = await sliceRecord([argv[0], ...JSON.parse(line)]);
    await new Promise((resolve) => process.stdout.write(record + "\n", resolve));
  }
}

main().catch((e) => {
  console.error(`${running} failed: ${e.stack || e}`);
  process.exit(1);
});
