package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// credentialTable is one table with Credentials: its key prefix ("consent."), its url
// and its credentials.
type credentialTable struct {
	prefix, url string
	cr          Credentials
}

// credentialTables is every table of c that sends credentials to a url.
func (c *Config) credentialTables() []credentialTable {
	var ts []credentialTable
	if a := c.Audit; a != nil && a.Destination == AuditToRepository {
		ts = append(ts, credentialTable{"audit.", a.URL, a.Credentials})
		if f := a.Feed; f != nil {
			ts = append(ts, credentialTable{"audit.feed.", f.URL, f.Credentials})
		}
	}
	if c.PDQm != nil {
		ts = append(ts, credentialTable{"pdqm.", c.PDQm.URL, c.PDQm.Credentials})
	}
	if c.Resolver != nil {
		ts = append(ts, credentialTable{"resolver.", c.Resolver.URL, c.Resolver.Credentials})
	}
	if c.Consent != nil {
		ts = append(ts, credentialTable{"consent.", c.Consent.URL, c.Consent.Credentials})
	}
	if c.Localizer != nil {
		ts = append(ts, credentialTable{"localizer.", c.Localizer.URL, c.Localizer.Credentials})
	}
	if d := c.Registry.MCSD; d != nil {
		ts = append(ts, credentialTable{"registry.mcsd.", d.URL, d.Credentials})
	}
	if p := c.PMIR; p != nil {
		ts = append(ts, credentialTable{"pmir.", p.URL, p.Credentials})
	}
	return ts
}

// clearTextProblems refuses a bearer token sent in clear, over an http url to a host
// that is not loopback, unless the table says allow_insecure = true; that is then a
// warning, logged at every start and reload. allow_insecure = true where nothing is
// sent in clear is refused too: it would be ignored in silence.
func (c *Config) clearTextProblems() (ps, warnings []Problem) {
	for _, t := range c.credentialTables() {
		if bindingURLProblem(t.url) != "" {
			continue // the url's own problem is reported
		}
		u, _ := url.Parse(t.url)
		inClear := t.cr.BearerTokenFile != "" && u.Scheme == "http" && !loopbackHost(u.Hostname())
		switch {
		case inClear && !t.cr.AllowInsecure:
			ps = append(ps, Problem{Key: t.prefix + "url", Message: fmt.Sprintf(
				"%sbearer_token_file is sent in clear over http to a non-loopback host; use https or set %sallow_insecure = true",
				t.prefix, t.prefix)})
		case inClear:
			warnings = append(warnings, Problem{Key: t.prefix + "allow_insecure", Message: fmt.Sprintf(
				"the token of %sbearer_token_file is sent in clear over http to a non-loopback host (%surl)", t.prefix, t.prefix)})
		case t.cr.AllowInsecure:
			why := "it has no bearer_token_file"
			switch {
			case t.cr.BearerTokenFile == "":
			case u.Scheme == "https":
				why = t.prefix + "url is https"
			default:
				why = t.prefix + "url names a loopback host"
			}
			ps = append(ps, Problem{Key: t.prefix + "allow_insecure", Message: fmt.Sprintf(
				"is true but nothing is sent in clear (%s): remove it", why)})
		}
	}
	return ps, warnings
}

// loopbackHost reports whether host (a URL's host name, without brackets) is
// "localhost" or an address of 127.0.0.0/8 or ::1.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
