import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';

// One command in a running container (`docker exec`), bounded in time: its
// exit code and what it wrote. The answerer container's zone reload uses it.

export interface ExecResult {
  exitCode: number | null;
  output: string;
}

export async function execIn(docker: Docker, containerId: string, cmd: string[], timeoutMs: number): Promise<ExecResult> {
  const signal = AbortSignal.timeout(timeoutMs);
  const run = async (): Promise<ExecResult> => {
    const exec = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    let output = '';
    const sink = new PassThrough();
    sink.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    docker.modem.demuxStream(stream, sink, sink);
    await new Promise<void>((resolve, reject) => {
      const abort = () => {
        stream.destroy();
        reject(new Error(`docker exec ${cmd[0]} did not finish within ${timeoutMs} ms`));
      };
      signal.addEventListener('abort', abort, { once: true });
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', reject);
    });
    const info = await exec.inspect();
    return { exitCode: info.ExitCode ?? null, output: output.trim() };
  };
  return Promise.race([
    run(),
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error(`docker exec ${cmd[0]} did not finish within ${timeoutMs} ms`)), { once: true })),
  ]);
}
