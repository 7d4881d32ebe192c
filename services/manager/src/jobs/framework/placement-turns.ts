// Placements are made one at a time on the leader. A job plans where its new instances go
// from the replicated state and then commits the plan; a second job that planned before the
// first one's commit was applied saw none of it. Six concurrent create_cluster jobs of one
// compute node each all chose the same least-loaded host of three that way (issue 35). In
// turn, each plan sees every placement begun before it, committed (or failed) first.
//
// The turns are the leader's alone: a placement is one Raft commit, so a turn is short; a
// job whose turn comes after this member lost leadership fails to commit, as any step does.

export class PlacementTurns {
  private last: Promise<unknown> = Promise.resolve();

  /**
   * Runs `place` (plan on the state as of now, then commit) once every placement taken
   * before it has settled. Its result or failure is the caller's; the next turn waits
   * for it either way.
   */
  take<T>(place: () => Promise<T>): Promise<T> {
    const turn = this.last.then(place);
    this.last = turn.catch(() => undefined);
    return turn;
  }
}
