import { AppError } from '../errors.js';

// Who is asking, as the domain functions see it (http/auth.ts authenticates
// and builds it), and what that caller may see.

export type Role = 'operator' | 'customer';

export interface AuthContext {
  tokenId: string;
  /** The token's name (the audit trail's actor). */
  name?: string;
  role: Role;
  /** The customer's team; null for operators. */
  teamId: string | null;
}

/**
 * Prisma `where` fragment limiting a query to what the caller may see:
 * nothing for operators, the caller's team for customers. Resources outside
 * it are then simply not found (404), so their existence is not leaked.
 */
export function teamScope(auth: AuthContext): { teamId?: string } {
  if (auth.role === 'operator') return {};
  if (!auth.teamId) throw new AppError('FORBIDDEN', 'this customer token has no team');
  return { teamId: auth.teamId };
}
