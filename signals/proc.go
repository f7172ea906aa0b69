package signals

// Process is one entry of the process table: enough to tell which processes
// descend from which, and which are dead but not yet reaped.
type Process struct {
	Pid  int
	PPid int // parent; an orphan's is its (sub)reaper's
	Pgid int // process group
	// Zombie is set for a process that has exited and waits for its parent
	// to reap it: it can no longer run or be signalled.
	Zombie bool
}

// Descendants returns the processes in procs that descend from pid (its
// children, theirs, and so on), leaving out every process for which skip
// returns true together with all of its own descendants. skip may be nil.
func Descendants(procs []Process, pid int, skip func(Process) bool) []Process {
	children := make(map[int][]Process, len(procs))
	for _, p := range procs {
		children[p.PPid] = append(children[p.PPid], p)
	}
	var out []Process
	seen := map[int]bool{pid: true} // a table read while it changed may loop
	for queue := []int{pid}; len(queue) > 0; {
		parent := queue[0]
		queue = queue[1:]
		for _, p := range children[parent] {
			if seen[p.Pid] || (skip != nil && skip(p)) {
				continue
			}
			seen[p.Pid] = true
			out = append(out, p)
			queue = append(queue, p.Pid)
		}
	}
	return out
}
