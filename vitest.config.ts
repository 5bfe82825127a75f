import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'sdk/node/test/**/*.test.ts'],
    // Integration tests start real nats-server processes and worker pools: keep the machine's two cores sane.
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    retry: 0,
    // expect.poll waits for something to happen (a pipeline's commit, a page's answer): on two shared cores that
    // can take longer than its default second. A poll that holds ends as soon as it holds.
    expect: { poll: { timeout: 15_000 } },
  },
});
