// A WebSocket stand-in for unit tests of AgentSession's clocks: its writes
// complete only when the test flushes them, which a real socket cannot be
// made to do on cue. Socket behaviour itself is tested with real sockets.

export function stubSocket() {
  const pending: (() => void)[] = [];
  const socket = {
    bufferedAmount: 0,
    closedWith: null as number | null,
    send(_data: unknown, optionsOrCb?: unknown, cb?: (err?: Error) => void) {
      const done = typeof optionsOrCb === 'function' ? (optionsOrCb as (err?: Error) => void) : cb;
      pending.push(() => done?.());
    },
    close(code: number) {
      socket.closedWith = code;
    },
    terminate() {},
  };
  return { socket, flush: () => pending.splice(0).forEach((write) => write()) };
}
