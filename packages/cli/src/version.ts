import { PANEL_VERSION_HEADER, fittingLine, versionsFit } from '@tether/common';
import { CliError } from './errors.js';

/** This CLI's version: package.json's (a test keeps them equal); sent as the user agent. */
export const CLI_VERSION = '0.1.0';

/**
 * Refuses an answer from a panel this CLI does not fit, before its body is read: the message says both
 * versions and where to get the panel's own CLI (every panel serves it at /cli/tether-cli.tgz).
 */
export function checkPanelVersion(panelUrl: string, header: string | string[] | undefined): void {
  const panel = Array.isArray(header) ? header[0] : header;
  const install = `install the panel's own CLI: npm install -g ${panelUrl}/cli/tether-cli.tgz`;
  if (panel === undefined) {
    throw new CliError(
      'VERSION_MISMATCH',
      `the server at ${panelUrl} does not say its Tether version (no ${PANEL_VERSION_HEADER} header): it is not a Tether panel, or one older than this CLI ${CLI_VERSION} works with; check the URL, or ${install}`,
    );
  }
  if (!versionsFit(CLI_VERSION, panel)) {
    throw new CliError(
      'VERSION_MISMATCH',
      `this tether CLI is version ${CLI_VERSION} and the panel at ${panelUrl} is version ${panel}: they do not fit (this CLI works with panels ${fittingLine(CLI_VERSION)}); ${install}`
    );
  }
}
