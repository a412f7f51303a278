/**
 * Sequential round trips: the longest chain of requests in which each one started only after
 * the previous one had been answered. Requests sent together count once.
 */
export function sequentialDepth(requests: ReadonlyArray<{ time: number; respondedAt?: number }>): number {
  const depths: number[] = [];
  requests.forEach((request, i) => {
    let depth = 1;
    for (let j = 0; j < i; j++) {
      const earlier = requests[j];
      if (earlier?.respondedAt !== undefined && earlier.respondedAt <= request.time)
        depth = Math.max(depth, (depths[j] ?? 1) + 1);
    }
    depths.push(depth);
  });
  return Math.max(0, ...depths);
}
