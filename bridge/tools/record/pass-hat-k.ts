/** C(n, k) as a float (exact for the small n of trials). */
function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/**
 * tau-bench's pass^k: for each task with n trials of which c succeeded, C(c, k) / C(n, k) (the
 * chance that k trials drawn without replacement all succeed), averaged over tasks. Tasks with
 * fewer than k trials are left out of that k.
 */
export function passHatK(successesPerTask: { n: number; c: number }[], k: number): number | null {
  const eligible = successesPerTask.filter((t) => t.n >= k);
  if (!eligible.length) return null;
  return eligible.reduce((s, t) => s + choose(t.c, k) / choose(t.n, k), 0) / eligible.length;
}
