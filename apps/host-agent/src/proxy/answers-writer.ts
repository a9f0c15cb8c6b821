import path from 'node:path';
import { writeFileAtomic } from '../state/atomic-file.js';
import { keptNames, syncNameFiles } from './domain-files.js';
import { NAME_LISTS, type Answers } from './static-answers.js';

/**
 * Puts new answers in place in the order that keeps every request routable: the name files of removed routes go
 * first, then the answerer's zone, then the name files of added routes (a name becomes routable only once the
 * answerer can name its upstreams), and last the digest that says which answers are in place.
 */
export async function writeAnswers(dir: string, answers: Answers, publishZone: (lines: string[]) => Promise<unknown>): Promise<void> {
  for (const kind of NAME_LISTS) await syncNameFiles(path.join(dir, kind), await keptNames(path.join(dir, kind), answers[kind]));
  await publishZone([`; answers ${answers.digest}`, ...answers.records]);
  for (const kind of NAME_LISTS) await syncNameFiles(path.join(dir, kind), answers[kind]);
  await writeFileAtomic(path.join(dir, 'digest'), `${answers.digest}\n`);
}
