// Code-unit order for names and ids: the same on every panel, whatever its locale.
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
