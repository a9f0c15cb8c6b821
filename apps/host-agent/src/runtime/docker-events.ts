import type Docker from 'dockerode';
import { labelFilter, withSignal } from '../docker/docker-client.js';
import { parseJsonLines } from '../docker/docker-streams.js';
import type { EventHandlers, EventSubscription } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError, toRuntimeError } from './errors.js';

// Docker's event stream for the containers carrying `labels` (the reconcile loop's event-watcher.ts): opened
// within `callTimeoutMs` (a frozen daemon accepts the connection and never answers), each container event handed
// on, and its end (the daemon closed it, an error, a close) said once.

export function subscribeEvents(docker: Docker, labels: Record<string, string>, handlers: EventHandlers, callTimeoutMs: number): EventSubscription {
  const controller = new AbortController();
  let stream: NodeJS.ReadableStream | undefined;
  let closed = false;
  const finish = (error: Error | null) => {
    if (closed) return;
    closed = true;
    clearTimeout(connectTimer);
    handlers.onClose(error);
  };
  // A frozen daemon accepts the connection and never answers: bound the wait for the stream to open.
  const connectTimer = setTimeout(() => {
    controller.abort();
    finish(new RuntimeError(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, `docker did not open the event stream within ${callTimeoutMs} ms`));
  }, callTimeoutMs);
  connectTimer.unref();
  docker
    .getEvents(withSignal<Docker.GetEventsOptions>(controller.signal, { filters: { type: ['container'], label: labelFilter(labels) } }))
    .then((s) => {
      stream = s;
      if (closed) return (s as unknown as { destroy(): void }).destroy();
      clearTimeout(connectTimer);
      handlers.onOpen();
      parseJsonLines(s, (line) => {
        const event = line as { Type?: string; Action?: string; Actor?: { ID?: string; Attributes?: Record<string, string> } };
        if (event.Type !== 'container' || !event.Action || !event.Actor?.ID) return;
        handlers.onEvent({ action: event.Action, containerId: event.Actor.ID, labels: event.Actor.Attributes ?? {} });
      }).then(
        () => finish(new RuntimeError(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, 'docker closed the event stream')),
        (err: unknown) => finish(toRuntimeError(err, 'event stream', 'daemon')),
      );
    })
    .catch((err: unknown) => finish(toRuntimeError(err, 'open event stream', 'daemon')));
  return {
    close() {
      closed = true;
      clearTimeout(connectTimer);
      controller.abort();
      (stream as unknown as { destroy?: () => void } | undefined)?.destroy?.();
    },
  };
}
