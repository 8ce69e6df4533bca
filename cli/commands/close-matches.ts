/** Edit distance (insertions, deletions, substitutions) between two short strings. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The known names closest to a mistyped one, for "did you mean" lines: the same family first
 * (`library-99` → the `library-*` ids), then by edit distance; at most `max`.
 */
export function closeMatches(wanted: string, known: readonly string[], max = 5): string[] {
  const family = (s: string) => s.replace(/[-_]?\d+$/, "").replace(/-v\d+$/, "");
  const w = wanted.toLowerCase();
  const scored = known.map((k) => {
    const kl = k.toLowerCase();
    const sameFamily = family(kl) === family(w) || kl.startsWith(w) || w.startsWith(family(kl));
    return { k, sameFamily, d: editDistance(w, kl) };
  });
  const limit = Math.max(2, Math.floor(w.length / 3));
  return scored
    .filter((s) => s.sameFamily || s.d <= limit)
    .sort((a, b) => Number(b.sameFamily) - Number(a.sameFamily) || a.d - b.d || a.k.localeCompare(b.k, "en", { numeric: true }))
    .slice(0, max)
    .map((s) => s.k);
}
