export { DockerLogSource, type LogSource, type ServiceContainer } from './docker-logs.js';
export { LogStreams, DEFAULT_MAX_LOG_STREAMS, type LogChannel } from './log-streams.js';
export { DEFAULT_LOG_STREAM_LIMITS, LOG_END_CODES } from './log-stream.js';
