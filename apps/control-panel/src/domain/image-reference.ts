// Docker image references, after the grammar of distribution/reference
// (github.com/distribution/reference, reference.go):
//
//   reference  := name [ ":" tag ] [ "@" digest ]
//   name       := [ domain "/" ] path-component ( "/" path-component )*
//   domain     := host [ ":" port ]            (host: DNS name or IPv4; IPv6 is not accepted here)
//   path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//   tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//   digest     := algorithm ":" [0-9a-fA-F]{32,}
//
// It is a JSON-schema pattern so validation rejects a bad image before any
// handler runs and OpenAPI shows the rule. The image is handed to the agent's
// Docker API as a string, never to a shell.

export const MAX_IMAGE_LENGTH = 512;

const domainComponent = '(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])';
const domain = `${domainComponent}(?:\\.${domainComponent})*(?::[0-9]{1,5})?`;
const pathComponent = '[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*';
const tag = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';

/** Anchored pattern for a full image reference. */
export const IMAGE_REFERENCE_PATTERN = `^(?:${domain}/)?${pathComponent}(?:/${pathComponent})*(?::${tag})?(?:@${digest})?$`;

const IMAGE_REFERENCE = new RegExp(IMAGE_REFERENCE_PATTERN);

export function isImageReference(value: string): boolean {
  return value.length <= MAX_IMAGE_LENGTH && IMAGE_REFERENCE.test(value);
}
