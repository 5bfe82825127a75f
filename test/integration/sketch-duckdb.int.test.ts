import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueryEngine } from '../../storage/duckdb.js';
import { bucketOf, bucketSql, RELATIVE_ERROR, sketchQuantiles } from '../../storage/sketch.js';
import { tempDir } from '../support/env.js';

let dir: string;
let engine: QueryEngine;

beforeAll(async () => {
  dir = await tempDir('sketch');
  engine = await QueryEngine.open(dir, 2);
});
afterAll(async () => {
  engine?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

/** Durations drawn in SQL (setseed makes them the same every run). */
const DRAWS: Record<string, string> = {
  'log-normal': 'exp(3.5 + 0.9 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))',
  bimodal: 'CASE WHEN random() < 0.7 THEN 5 + random() ELSE 2000 + 500 * random() END',
  constant: '12.5',
};

describe('the latency sketch against DuckDB', () => {
  it('buckets in SQL exactly as in JavaScript, at the buckets’ bounds too', async () => {
    const values = [0, 1e-300, 0.001, 0.5, 1, 2, 3, 12.5, 1000, 86_400_000];
    for (let i = -500; i < 1700; i += 7) values.push(2 ** (i / 64), 2 ** (i / 64) * (1 + 2 ** -50));
    const rows = await engine.all(
      `SELECT v, ${bucketSql('v')} AS b FROM (SELECT unnest($values)::DOUBLE AS v)`,
      { values: values.map(String) },
    );
    expect(rows.map((r) => [Number(r.v), Number(r.b)])).toEqual(values.map((v) => [v, bucketOf(v)]));
  });

  for (const [name, draw] of Object.entries(DRAWS)) {
    for (const n of [1, 1_000_000]) {
      it(`holds 1 % against quantile_cont: ${name}, ${n.toLocaleString('en')} rows`, async () => {
        await engine.all('SELECT setseed(0.42)');
        const table = `t_${name.replace(/\W/g, '_')}_${n}`;
        await engine.all(`CREATE OR REPLACE TABLE ${table} AS SELECT ${draw} AS d FROM range(${n})`);
        const [exact] = await engine.all(`SELECT quantile_cont(d, [0.5, 0.95, 0.99]) AS q FROM ${table}`);
        const [sketch] = await engine.all(
          `SELECT list(b ORDER BY b) AS buckets, list(c ORDER BY b) AS counts
           FROM (SELECT ${bucketSql('d')} AS b, count(*)::DOUBLE AS c FROM ${table} GROUP BY b)`,
        );
        const got = sketchQuantiles(
          { buckets: sketch!.buckets as number[], counts: sketch!.counts as number[] },
          [0.5, 0.95, 0.99],
        );
        (exact!.q as number[]).forEach((e, i) => {
          expect(Math.abs(got[i]! - e), `${name} q${i}: ${got[i]} against ${e}`).toBeLessThanOrEqual(
            RELATIVE_ERROR * e + 1e-12,
          );
        });
        await engine.all(`DROP TABLE ${table}`);
      });
    }
  }
});
