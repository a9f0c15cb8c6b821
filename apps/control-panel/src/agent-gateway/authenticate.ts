import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Db } from '../db/database.js';
import { hashToken } from '../domain/tokens.js';

export interface AuthenticatedNode {
  id: string;
  name: string;
}

/**
 * Checks the node token on the upgrade request, before any socket exists:
 * unknown token 401, decommissioned node 403. Both answers are plain HTTP.
 */
export async function authenticateNode(prisma: Db, request: FastifyRequest): Promise<AuthenticatedNode> {
  const header = request.headers.authorization;
  const token = header?.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
  if (!token) throw new AppError('UNAUTHORIZED', 'a node token is required: Authorization: Bearer <node token>');
  const node = await prisma.node.findUnique({
    where: { tokenHash: hashToken(token) },
    select: { id: true, name: true, decommissioned: true },
  });
  if (!node) throw new AppError('UNAUTHORIZED', 'unknown node token');
  if (node.decommissioned) throw new AppError('FORBIDDEN', `node ${node.name} is decommissioned; its agent is refused`);
  return { id: node.id, name: node.name };
}
