/** A text's words, lowercased, punctuation dropped ("a library's loans" -> a, library, s, loans). */
export function words(text: string): string[] {
  return text.toLowerCase().replace(/[^\p{L}\p{N}\s]/gu, " ").split(/\s+/).filter(Boolean);
}

/** Word n-gram shingles of a text, lowercased, for near-duplicate detection. */
export function shingles(text: string, n = 2): Set<string> {
  const ws = words(text);
  const out = new Set<string>();
  if (ws.length < n) {
    if (ws.length) out.add(ws.join(" "));
    return out;
  }
  for (let i = 0; i + n <= ws.length; i++) out.add(ws.slice(i, i + n).join(" "));
  return out;
}

export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let inter = 0;
  for (const x of a) if (b.has(x)) inter++;
  return inter / (a.size + b.size - inter);
}
