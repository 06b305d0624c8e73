package server

// StopReporter is implemented by a Surface whose Stop leaves something the log line of
// drain step 4 must say, as key/value pairs (the audit spool: the records still
// undelivered at exit). It is asked once step 4 ended, abandoned surfaces included.
type StopReporter interface {
	StopReport() []any
}

// stopReports gathers the StopReporters' pairs, in the order of the surfaces.
func (s *Server) stopReports() []any {
	var out []any
	for _, sf := range s.surfaces {
		if r, ok := sf.(StopReporter); ok {
			out = append(out, r.StopReport()...)
		}
	}
	return out
}
