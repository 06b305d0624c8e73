package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The [registry.mcsd] table (docs/bindings.md#directory): the member registry read from an IHE
// mCSD directory instead of [[registry.members]]. An initial ITI-90 load, then ITI-91
// refreshes on an interval; each candidate registry is checked by the rules of
// [[registry.members]] (MemberProblems) and the rest of the configuration against it
// (WithMembers, then Validate) before it is swapped in.

// Defaults and limits of [registry.mcsd].
const (
	DefaultDirectoryRefreshIntervalMS = 60000
	DefaultDirectoryTimeoutMS         = 30000
	// MinDirectoryRefreshIntervalMS keeps a refresh loop from hammering the directory.
	MinDirectoryRefreshIntervalMS = 100
	MaxDirectoryRefreshIntervalMS = 86400000
	MaxDirectoryTimeoutMS         = 300000
	// MaxDirectoryMembers bounds the members one directory may name.
	MaxDirectoryMembers = 5000
)

// MCSD is the [registry.mcsd] table.
type MCSD struct {
	// URL is the directory's FHIR base; ITI-90 and ITI-91 are asked under it, and a
	// next link is followed only under it.
	URL string `toml:"url"`
	// RefreshIntervalMS is the time between two refreshes (ITI-91); default 60000.
	RefreshIntervalMS *int64 `toml:"refresh_interval_ms"`
	// TimeoutMS is the deadline of one whole refresh, every page of every type
	// included; default 30000, at most refresh_interval_ms.
	TimeoutMS *int64 `toml:"timeout_ms"`
	// MemberIdentifierSystem is the system of the Organization identifier that is a
	// member's id; required. An Organization without one is not a member.
	MemberIdentifierSystem string `toml:"member_identifier_system"`
	// PatientDomainIdentifierSystem is the system of the Organization identifier
	// whose value is the member's patient identifier domain (its identifier_system,
	// an absolute URI): mCSD has no field for it. Required with [resolver] or
	// localizer.protocol = "pixm", refused without them (nothing would read it).
	PatientDomainIdentifierSystem string `toml:"patient_domain_identifier_system"`
	// CacheFile, when set, keeps the last accepted registry (an absolute path), so
	// that a restart with the directory down still becomes ready.
	CacheFile string `toml:"cache_file"`
	// Credentials of the directory.
	Credentials
}

// RefreshInterval is registry.mcsd.refresh_interval_ms resolved.
func (m *MCSD) RefreshInterval() time.Duration { return ms(m.refreshIntervalMS()) }

// Timeout is registry.mcsd.timeout_ms resolved.
func (m *MCSD) Timeout() time.Duration {
	if m == nil || m.TimeoutMS == nil {
		return ms(DefaultDirectoryTimeoutMS)
	}
	return ms(*m.TimeoutMS)
}

// refreshIntervalMS is refresh_interval_ms resolved, as the file counts it, for its
// checks.
func (m *MCSD) refreshIntervalMS() int64 {
	if m == nil || m.RefreshIntervalMS == nil {
		return DefaultDirectoryRefreshIntervalMS
	}
	return *m.RefreshIntervalMS
}

// directoryProblems checks [registry.mcsd].
func (c *Config) directoryProblems(opts Options) []Problem {
	d := c.Registry.MCSD
	if d == nil {
		return nil
	}
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	if len(c.Registry.Members) > 0 {
		add("registry.mcsd", "is set with [[registry.members]]: set only one of [[registry.members]] and [registry.mcsd], the registry is a document or read from a directory")
	}
	if msg := bindingURLProblem(d.URL); msg != "" {
		add("registry.mcsd.url", "%s", msg)
	}
	intervalOK := true
	if d.RefreshIntervalMS != nil {
		if msg := msProblem("registry.mcsd.refresh_interval_ms", *d.RefreshIntervalMS); msg != "" {
			add("registry.mcsd.refresh_interval_ms", "%s", msg)
			intervalOK = false
		}
	}
	if d.TimeoutMS != nil {
		if msg := msProblem("registry.mcsd.timeout_ms", *d.TimeoutMS); msg != "" {
			add("registry.mcsd.timeout_ms", "%s", msg)
		} else if intervalOK && *d.TimeoutMS > d.refreshIntervalMS() {
			add("registry.mcsd.timeout_ms", "%d is longer than registry.mcsd.refresh_interval_ms (%d): one refresh must end before the next", *d.TimeoutMS, d.refreshIntervalMS())
		}
	}
	if msg := domainProblem(d.MemberIdentifierSystem); d.MemberIdentifierSystem == "" {
		add("registry.mcsd.member_identifier_system", "is required: the system of the Organization identifier that is a member's id")
	} else if msg != "" {
		add("registry.mcsd.member_identifier_system", "%s", msg)
	}
	if ds := d.PatientDomainIdentifierSystem; ds != "" {
		user := c.usesIdentifierSystem()
		switch msg := domainProblem(ds); {
		case msg != "":
			add("registry.mcsd.patient_domain_identifier_system", "%s", msg)
		case ds == d.MemberIdentifierSystem:
			add("registry.mcsd.patient_domain_identifier_system", "%q is also registry.mcsd.member_identifier_system: a member's id and its patient identifier domain are two identifiers", ds)
		case user == "" && c.Consent == nil:
			add("registry.mcsd.patient_domain_identifier_system", "is set but neither [resolver], [consent] nor localizer.protocol = %q is configured: nothing would read it", LocalizerPIXm)
		}
	} else if user := c.usesIdentifierSystem(); user != "" {
		add("registry.mcsd.patient_domain_identifier_system", "is required with %s: the system of the Organization identifier whose value is the member's patient identifier domain (its identifier_system)", user)
	}
	if d.CacheFile != "" {
		switch {
		case !filepath.IsAbs(d.CacheFile):
			add("registry.mcsd.cache_file", "%q must be an absolute path", d.CacheFile)
		case len(d.CacheFile) > MaxTerminationMessagePathBytes:
			add("registry.mcsd.cache_file", "is longer than %d bytes", MaxTerminationMessagePathBytes)
		case !opts.SkipFiles:
			if msg := cacheFileProblem(d.CacheFile); msg != "" {
				add("registry.mcsd.cache_file", "%s", msg)
			}
		}
	}
	ps = append(ps, d.credentialProblems("registry.mcsd.", opts)...)
	return ps
}

// cacheFileProblem is what keeps serve from reading and writing the cache file, or
// "": its folder must be a directory that exists and that the process may write in
// (the file is replaced through a temporary file there), and the file, when it
// exists, must be a regular file. Nothing is created or read.
func cacheFileProblem(file string) string {
	dir := filepath.Dir(file)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s cannot be used: its folder %s does not exist", file, dir)
	case err != nil:
		return fmt.Sprintf("%s cannot be used: %v", file, err)
	case !fi.IsDir():
		return fmt.Sprintf("%s cannot be used: %s is %s, not a directory", file, dir, fileKind(fi.Mode()))
	}
	if err := writable(dir); err != nil {
		return fmt.Sprintf("%s cannot be used: its folder %s is not writable by this process: %v", file, dir, err)
	}
	if fi, err := os.Stat(file); err == nil && !fi.Mode().IsRegular() {
		return fmt.Sprintf("%s is %s, not a regular file", file, fileKind(fi.Mode()))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s cannot be used: %v", file, err)
	}
	return ""
}

// MemberProblems are the problems of a registry read from a directory by the rules
// of [[registry.members]] (ids and endpoint ids well formed and unique, query
// endpoints absolute http(s) URLs; identifier_system and home_community_id, where
// the directory gave them, of their syntax and each on one member only), and an
// empty one: a registry that breaks them breaks a rule of its own (directory_fault
// = "registry-invalid"). Whether the rest of the configuration needs those two keys
// is not asked here (Validate on WithMembers).
func MemberProblems(members []Member) []Problem {
	if len(members) == 0 {
		return []Problem{{Key: "registry.members", Message: "the directory names no member"}}
	}
	ps := Registry{Members: members}.validate()
	systems, hcids := map[string]string{}, map[string]string{}
	for i, m := range members {
		key := fmt.Sprintf("registry.members[%d]", i)
		if m.IdentifierSystem != "" {
			if msg := domainProblem(m.IdentifierSystem); msg != "" {
				ps = append(ps, Problem{Key: key + ".identifier_system", Message: fmt.Sprintf("of member %q: %s", m.ID, msg)})
			} else if other, dup := systems[m.IdentifierSystem]; dup {
				ps = append(ps, Problem{Key: key + ".identifier_system", Message: fmt.Sprintf("%q of member %q is already member %q's: one domain cannot map to two members", m.IdentifierSystem, m.ID, other)})
			} else {
				systems[m.IdentifierSystem] = m.ID
			}
		}
		if m.HomeCommunityID != "" {
			if msg := homeCommunityProblem(m.HomeCommunityID); msg != "" {
				ps = append(ps, Problem{Key: key + ".home_community_id", Message: fmt.Sprintf("of member %q: %s", m.ID, msg)})
			} else if other, dup := hcids[m.HomeCommunityID]; dup {
				ps = append(ps, Problem{Key: key + ".home_community_id", Message: fmt.Sprintf("%q of member %q is already member %q's: one community cannot be two members", m.HomeCommunityID, m.ID, other)})
			} else {
				hcids[m.HomeCommunityID] = m.ID
			}
		}
	}
	return ps
}

// NormalizeHomeCommunityID writes a homeCommunityId read from a directory as
// home_community_id is written: a bare OID, or one after "urn:oid:" in any case, is
// "urn:oid:" and the OID. Anything else is returned as it is, for MemberProblems to
// refuse.
func NormalizeHomeCommunityID(s string) string {
	if len(s) >= len("urn:oid:") && strings.EqualFold(s[:len("urn:oid:")], "urn:oid:") {
		return "urn:oid:" + s[len("urn:oid:"):]
	}
	if validOID(s) {
		return "urn:oid:" + s
	}
	return s
}

// UsesIdentifierSystem reports whether the configuration reads the members'
// identifier_system ([resolver], localizer.protocol = "pixm").
func (c *Config) UsesIdentifierSystem() bool { return c.usesIdentifierSystem() != "" }

// UsesHomeCommunityID reports whether the configuration reads the members'
// home_community_id (localizer.protocol = "xcpd").
func (c *Config) UsesHomeCommunityID() bool {
	return c.Localizer != nil && c.Localizer.Protocol == LocalizerXCPD
}

// WithMembers is c with members as its [[registry.members]], for checking the rest
// of the configuration against a registry read from a directory: any problem of
// Validate on it is a configuration that does not fit the registry
// (directory_fault = "configuration-mismatch"). The [registry.mcsd] table is left
// out of the copy (it is the source of the members, not a second registry). c is
// not changed; the copy shares its tables, read only.
func (c *Config) WithMembers(members []Member) *Config {
	cp := *c
	cp.Registry.Members = members
	cp.Registry.MCSD = nil
	cp.warnings = nil
	return &cp
}
