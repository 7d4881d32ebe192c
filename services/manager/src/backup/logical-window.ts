// A logical backup's daily window (`HH:MM:SS-HH:MM:SS`, the manager's local time, may cross
// midnight) placed on the calendar: which window a moment falls in, and which window
// opened last. A window is named by the local date it opened on.

export interface WindowBounds {
  startSecond: number;
  endSecond: number;
}

export interface WindowOccurrence {
  /** Local date (YYYY-MM-DD) the window opened on. */
  windowDay: string;
  opensAt: number;
  closesAt: number;
}

const localDay = (ms: number): string => {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
};

/** Local time `second` seconds after midnight of the day `dayOffset` days from the day of `ms`. */
function localTime(ms: number, dayOffset: number, second: number): number {
  const d = new Date(ms);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + dayOffset, Math.floor(second / 3600), Math.floor(second / 60) % 60, second % 60).getTime();
}

function occurrence(nowMs: number, dayOffset: number, w: WindowBounds): WindowOccurrence {
  const opensAt = localTime(nowMs, dayOffset, w.startSecond);
  const closesAt = localTime(nowMs, dayOffset + (w.endSecond > w.startSecond ? 0 : 1), w.endSecond);
  return { windowDay: localDay(opensAt), opensAt, closesAt };
}

/** The window that opened last at or before `nowMs` (open now or already closed). */
export function latestWindow(nowMs: number, w: WindowBounds): WindowOccurrence {
  const today = occurrence(nowMs, 0, w);
  return today.opensAt <= nowMs ? today : occurrence(nowMs, -1, w);
}

/** The window `nowMs` falls in, if it falls in one. */
export function openWindowAt(nowMs: number, w: WindowBounds): WindowOccurrence | undefined {
  const latest = latestWindow(nowMs, w);
  return nowMs < latest.closesAt ? latest : undefined;
}
