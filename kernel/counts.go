package kernel

// OpenCounts counts the project's Turns that wait: queued ones (due or
// not), and suspended ones waiting for input. It walks the Turns not
// finished, not the finished ones.
func (p *Project) OpenCounts() (queued, awaitingInput int) {
	for _, t := range p.Turns {
		switch {
		case t.State == StateQueued:
			queued++
		case t.State == StateSuspended && t.AwaitingInput != nil:
			awaitingInput++
		}
	}
	return queued, awaitingInput
}
