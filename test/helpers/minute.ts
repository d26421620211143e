/**
 * Waits, if need be, until the current UTC minute is in its first half. The rate limiter's "used in the last
 * minute" weighs the previous minute by what is left of it, so calls made just before a minute turns read as
 * fewer a few seconds later; a test that reads exact counts starts early in a minute.
 */
export async function startEarlyInAMinute(): Promise<void> {
  const into = new Date().getUTCSeconds();
  if (into > 25) await new Promise((r) => setTimeout(r, (61 - into) * 1000));
}
