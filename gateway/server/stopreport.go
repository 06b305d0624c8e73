package server

// stopReports gathers the StopReport hooks' pairs, in the order of the registrations.
func (s *Server) stopReports() []any {
	var out []any
	for _, p := range s.parts {
		if p.StopReport != nil {
			out = append(out, p.StopReport()...)
		}
	}
	return out
}
