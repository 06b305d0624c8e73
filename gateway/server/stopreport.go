package server

import "github.com/ferrofed/ferrofed/gateway/lifecycle"

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

// auditSpools gathers the AuditSpools hooks' entries, in the order of the
// registrations, for the termination message (at most lifecycle.MaxSpoolsReported).
func (s *Server) auditSpools() []lifecycle.SpoolLeft {
	var out []lifecycle.SpoolLeft
	for _, p := range s.parts {
		if p.AuditSpools != nil {
			out = append(out, p.AuditSpools()...)
		}
	}
	if len(out) > lifecycle.MaxSpoolsReported {
		out = out[:lifecycle.MaxSpoolsReported]
	}
	return out
}
