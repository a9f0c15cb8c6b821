import { spawn, type ChildProcess } from 'node:child_process';

export interface ManagedProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output (past or future). */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves when the process has exited. */
  exited(): Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Spawns a real child process (agent, panel) with its output captured for assertions and failure messages. */
export function spawnProcess(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ManagedProcess {
  const child = spawn(command, args, { env: { ...process.env, ...options.env }, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.length > 2_000_000) output = output.slice(-1_000_000);
    for (const listener of listeners) listener();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  return {
    child,
    pid: child.pid ?? -1,
    output: () => output,
    waitForOutput(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = output.match(pattern);
          if (match) {
            cleanup();
            resolve(match);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no output matching ${pattern} within ${timeoutMs} ms; output so far:\n${output.slice(-3000)}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    exited: () => exit,
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}
