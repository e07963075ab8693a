// A process's first check, against a guardian that has just started: fifty
// starts, each checked at once from a fresh Node process with the client's
// defaults; none may time out.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { test } from "node:test";

import { Fleet, ROOT } from "./fleet.mjs";

const STARTS = 50;

const FIRST_CHECK = `
import { Client, Policy } from ${JSON.stringify(join(ROOT, "clients", "typescript", "guardian.mjs"))};
const [url, token, account] = process.argv.slice(1);
const c = new Client(url, { tokens: token, onUnavailable: Policy.FAIL_CLOSED });
const t = performance.now();
const d = await c.check({ flow: "login", ip: "203.0.113.7", account });
console.log(JSON.stringify({ unavailable: d.unavailable, reason: d.reason, decision: d.decision, ms: performance.now() - t }));
`;

test("fifty starts, each checked at once", { timeout: 600_000 }, async () => {
  const fleet = await Fleet.start();
  try {
    const results = [];
    for (let i = 0; i < STARTS; i++) {
      const { proc, url } = await fleet.startGuardian(undefined, `guardian-${i}.log`);
      try {
        const { stdout } = await promisify(execFile)(process.execPath,
          ["--input-type=module", "-e", FIRST_CHECK, url, fleet.checkToken, `first-${i}@example.com`], { timeout: 60_000 });
        results.push(JSON.parse(stdout));
      } finally {
        await fleet.stop(proc);
      }
    }
    const late = results.filter((r) => r.unavailable);
    const ms = results.map((r) => r.ms).sort((a, b) => a - b);
    console.error(`typescript first checks: ${STARTS - late.length}/${STARTS} answered; ms min ${ms[0].toFixed(1)} median ${ms[STARTS >> 1].toFixed(1)} max ${ms.at(-1).toFixed(1)}`);
    assert.deepEqual(late, [], "first checks the client's policy decided");
    assert.ok(results.every((r) => r.decision === "allow"), JSON.stringify(results));
  } finally {
    await fleet.close();
  }
});
