export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  message?: string;
}

/** Polls until `check` returns a truthy value (which is returned) or the timeout passes. */
export async function waitFor<T>(check: () => T | Promise<T>, options: WaitOptions = {}): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const suffix = lastError ? `: last error ${(lastError as Error).message}` : '';
      throw new Error(`${options.message ?? 'condition'} not met within ${timeoutMs} ms${suffix}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
