// The one logger shape in Tether: pino's calling convention, fields first and
// the message second, so a pino logger passes as it is and tests can pass a
// silent or recording one. Conventions for the fields: an error goes in `err`
// as the Error itself (pino's serializer keeps its type, message, code and
// stack), a node's name in `node` and its id in `nodeId`; other ids likewise
// (`serviceId`, `deploymentId`, `sessionId`).

export interface Logger {
  debug(fields: object, message?: string): void;
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

export const silentLogger: Logger = Object.freeze({ debug() {}, info() {}, warn() {}, error() {} });
