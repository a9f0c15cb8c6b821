import { AppError } from '../errors.js';

// Domains and path prefixes end up verbatim in the proxy configuration the
// agents render, so they are held to a strict grammar here instead of being
// escaped later: nothing outside [a-z0-9.-] (domains) or the URL path's
// unreserved characters (prefixes) can reach a proxy config.

export const MAX_DOMAIN_LENGTH = 253;
export const MAX_PATH_PREFIX_LENGTH = 256;

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const HAS_LETTER = /[a-z]/;

/**
 * Why `domain` is not a lowercase RFC 1123 host name, or null when it is.
 * Rules: at most 253 characters, two or more dot-separated labels of 1–63
 * characters from [a-z0-9-] that neither start nor end with a hyphen, and a
 * last label that is not all digits (so no IPv4 addresses). No trailing dot,
 * no wildcards; internationalised names go in their punycode (xn--) form.
 */
export function domainProblem(domain: string): string | null {
  if (domain.length === 0) return 'the domain is empty';
  if (domain.length > MAX_DOMAIN_LENGTH) return `the domain is longer than ${MAX_DOMAIN_LENGTH} characters`;
  if (domain !== domain.toLowerCase()) return 'the domain must be lowercase';
  const labels = domain.split('.');
  if (labels.length < 2) return 'the domain needs at least two labels (e.g. shop.example.com)';
  for (const label of labels) {
    if (label.length === 0) return 'the domain has an empty label';
    if (!LABEL.test(label)) {
      return `label ${JSON.stringify(label)} must be 1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'`;
    }
  }
  if (!HAS_LETTER.test(labels[labels.length - 1]!)) return 'the last label must contain a letter';
  return null;
}

/** Throws INVALID_DOMAIN unless `domain` is a valid host name; returns it unchanged. */
export function assertDomain(domain: string): string {
  const problem = domainProblem(domain);
  if (problem) throw new AppError('INVALID_DOMAIN', `invalid domain: ${problem}`);
  return domain;
}

/**
 * A path prefix: '/' followed by segments of RFC 3986 unreserved characters
 * (A-Z a-z 0-9 - . _ ~) separated by single slashes. No '*' (a wildcard to
 * Caddy), no '%' (no second decoding), no '.' or '..' segments, no '//'.
 * JSON schema pattern, so it is enforced by validation and shown in OpenAPI.
 */
export const PATH_PREFIX_PATTERN = '^/(?:(?!\\.\\.?(?:/|$))[A-Za-z0-9._~-]+/)*(?:(?!\\.\\.?$)[A-Za-z0-9._~-]+)?$';
