/** One line of the bench table. */
export interface Row {
  what: string;
  ours: string;
  /** OpenEnv's figure, measured in the same run (interleaved with ours); absent where not measured. */
  peer?: string;
  reference: string;
  ratio: string;
  target: string;
  met: boolean | null;
}

export const fmt = (x: number, d = 1) => (x >= 100 ? Math.round(x).toString() : x.toFixed(d));

/**
 * A ratio in words that cannot mislead: always ≥ 1, with the direction said ("5.2× slower",
 * never "0.2× faster"). `higherIsBetter` for throughputs; `words` for other units (less/more).
 */
export function versus(ours: number, ref: number, higherIsBetter: boolean, words: [better: string, worse: string] = ["faster", "slower"]): string {
  if (!(ours > 0) || !(ref > 0)) return "—";
  const word = (higherIsBetter ? ours >= ref : ours <= ref) ? words[0] : words[1];
  const r = Math.max(ours, ref) / Math.min(ours, ref);
  if (r < 1.05) return `about the same (${r.toFixed(2)}× ${word})`;
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(1)}× ${word}`;
}

export const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;

/** `median [min–max]` of repeated measurements. */
export function spread(xs: number[], d = 1): string {
  if (xs.length === 1) return fmt(xs[0]!, d);
  return `${fmt(median(xs), d)} [${fmt(Math.min(...xs), d)}–${fmt(Math.max(...xs), d)}]`;
}
