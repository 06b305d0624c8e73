package config

import (
	"bytes"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// The values of [audit] destination and on_failure.
const (
	// AuditToLog writes each AuditEvent as one structured log line; no report key.
	AuditToLog = "log"
	// AuditToRepository spools each AuditEvent and delivers it over RESTful ATNA
	// (ITI-20) to audit.url, and to audit.feed.url when [audit.feed] is set.
	AuditToRepository = "repository"
	// AuditRefuse answers a request whose audit record could not be stored 503.
	AuditRefuse = "refuse"
	// AuditServe serves it anyway and logs that its record is missing.
	AuditServe = "serve"
)

// Defaults and limits of [audit] (docs/audit-spool.md).
const (
	DefaultAuditTimeoutMS = 5000
	MaxAuditTimeoutMS     = 60000
	// DefaultMaxSpoolBytes is audit.max_spool_bytes' default (256 MiB), for each spool.
	DefaultMaxSpoolBytes = 256 << 20
	// MinMaxSpoolBytes is the smallest cap: three segments, each larger than the
	// record limit (1 MiB), and the spool's headroom for its cursor and folders.
	MinMaxSpoolBytes = 4 << 20
	// MaxMaxSpoolBytes bounds the cap (64 GiB): a spool is scanned whole at start.
	MaxMaxSpoolBytes = 64 << 30
	// MaxBearerTokenBytes bounds a bearer_token_file.
	MaxBearerTokenBytes = 16 << 10
)

// Audit is the [audit] table (docs/audit-spool.md). Absent, nothing is audited and the
// report has neither audit_repository nor audit_feed.
type Audit struct {
	// Destination is "log" (the default) or "repository".
	Destination string `toml:"destination"`
	// URL is the audit record repository's FHIR base (repository only): events go to
	// POST {url}/AuditEvent.
	URL string `toml:"url"`
	// SpoolDir is the directory of the spools (repository only, required): the
	// repository's is <spool_dir>/repository, the feed's <audit.feed.spool_dir>/feed.
	SpoolDir string `toml:"spool_dir"`
	// MaxSpoolBytes caps what each spool puts on disk: its segment files (the one
	// preallocated next included), its quarantine, its cursor and folders, so that a
	// volume of RequiredSpoolBytes never runs out of space under the spools; an event
	// past it is refused (never an old one dropped). Default 256 MiB, from 4 MiB to
	// 64 GiB.
	MaxSpoolBytes *int64 `toml:"max_spool_bytes"`
	// TimeoutMS bounds one delivery exchange; default 5000, from 1 to 60000.
	TimeoutMS *int64 `toml:"timeout_ms"`
	// OnFailure is what a request whose audit record could not be stored gets:
	// "refuse" (the default: 503 OperationOutcome, no member asked) or "serve".
	OnFailure string `toml:"on_failure"`
	// Credentials of the repository.
	Credentials
	// Feed is the [audit.feed] table: a FHIR Feed repository that gets every event
	// too, from a spool of its own (repository only).
	Feed *AuditFeed `toml:"feed"`
}

// AuditFeed is the [audit.feed] table.
type AuditFeed struct {
	// URL is the feed repository's FHIR base.
	URL string `toml:"url"`
	// SpoolDir is the directory of the feed's spool, <spool_dir>/feed; it may be
	// audit.spool_dir.
	SpoolDir string `toml:"spool_dir"`
	// Credentials of the feed repository.
	Credentials
}

// Credentials are the files a binding authenticates with (Secrets mounted on
// Kubernetes). Each is read at start; the token file again at each exchange, so that a
// rotated token is used without a restart.
type Credentials struct {
	// ClientCertificateFile and ClientKeyFile are a PEM client certificate and its key
	// (mutual TLS); both or neither.
	ClientCertificateFile string `toml:"client_certificate_file"`
	ClientKeyFile         string `toml:"client_key_file"`
	// CAFile is a PEM bundle the server's certificate is verified against instead of
	// the system's roots.
	CAFile string `toml:"ca_file"`
	// BearerTokenFile holds a token sent as "Authorization: Bearer <token>".
	BearerTokenFile string `toml:"bearer_token_file"`
	// AllowInsecure (allow_insecure) lets the token of bearer_token_file be sent over
	// an http url to a host that is not loopback, in clear; it is refused otherwise,
	// and warned about at every start and reload when allowed. Default false.
	AllowInsecure bool `toml:"allow_insecure"`
}

// Timeout is audit.timeout_ms resolved.
func (a *Audit) Timeout() time.Duration {
	if a == nil || a.TimeoutMS == nil {
		return ms(DefaultAuditTimeoutMS)
	}
	return ms(*a.TimeoutMS)
}

// SpoolBytes is audit.max_spool_bytes resolved.
func (a *Audit) SpoolBytes() int64 {
	if a == nil || a.MaxSpoolBytes == nil {
		return DefaultMaxSpoolBytes
	}
	return *a.MaxSpoolBytes
}

// Spools is how many spools [audit] has: none with destination "log", one for the
// repository, two with [audit.feed].
func (a *Audit) Spools() int {
	switch {
	case a == nil || a.Destination != AuditToRepository:
		return 0
	case a.Feed != nil:
		return 2
	}
	return 1
}

// RequiredSpoolBytes is the size a volume needs to hold every spool cfg has when
// each is full: audit.max_spool_bytes × the number of spools (0 without a spool).
// Each spool counts everything it puts on disk within its cap (docs/audit-spool.md,
// "Sizing"), so a volume of this size never refuses a spool's write for lack of space;
// the file system's own overhead (an ext4 journal, the blocks it reserves) is the
// volume's to add: the operator's admission asks it of a spool claim on top of this.
func RequiredSpoolBytes(cfg *Config) int64 {
	if cfg == nil {
		return 0
	}
	return cfg.Audit.SpoolBytes() * int64(cfg.Audit.Spools())
}

// Refuses reports whether a request whose record could not be stored is refused.
func (a *Audit) Refuses() bool { return a == nil || a.OnFailure != AuditServe }

// applyDefaults fills what decoding over a pointer table cannot start from.
func (a *Audit) applyDefaults() {
	if a == nil {
		return
	}
	if a.Destination == "" {
		a.Destination = AuditToLog
	}
	if a.OnFailure == "" {
		a.OnFailure = AuditRefuse
	}
}

// validate returns the problems of [audit] and [audit.feed], each naming its key.
func (a *Audit) validate(opts Options) []Problem {
	if a == nil {
		return nil
	}
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "audit." + key, Message: fmt.Sprintf(format, args...)})
	}
	switch a.OnFailure {
	case AuditRefuse, AuditServe:
	default:
		add("on_failure", "%q is neither %q nor %q", a.OnFailure, AuditRefuse, AuditServe)
	}
	if a.TimeoutMS != nil {
		if msg := msProblem("audit.timeout_ms", *a.TimeoutMS); msg != "" {
			add("timeout_ms", "%s", msg)
		}
	}
	switch a.Destination {
	case AuditToLog:
		// Nothing of a repository may be set: it would be ignored in silence.
		for key, set := range map[string]bool{
			"url": a.URL != "", "spool_dir": a.SpoolDir != "", "max_spool_bytes": a.MaxSpoolBytes != nil,
			"timeout_ms": a.TimeoutMS != nil, "client_certificate_file": a.ClientCertificateFile != "",
			"client_key_file": a.ClientKeyFile != "", "ca_file": a.CAFile != "", "bearer_token_file": a.BearerTokenFile != "",
			"allow_insecure": a.AllowInsecure, "feed": a.Feed != nil,
		} {
			if set {
				add(key, "is set but audit.destination is %q: it is used with destination = %q only", AuditToLog, AuditToRepository)
			}
		}
		sortProblems(ps)
		return ps
	case AuditToRepository:
	default:
		add("destination", "%q is neither %q nor %q", a.Destination, AuditToLog, AuditToRepository)
		return ps
	}
	if msg := bindingURLProblem(a.URL); msg != "" {
		add("url", "%s", msg)
	}
	if msg := spoolDirProblem(a.SpoolDir, "repository", opts); msg != "" {
		add("spool_dir", "%s", msg)
	}
	if a.MaxSpoolBytes != nil && (*a.MaxSpoolBytes < MinMaxSpoolBytes || *a.MaxSpoolBytes > MaxMaxSpoolBytes) {
		add("max_spool_bytes", "%d is not from %d (4 MiB) to %d (64 GiB)", *a.MaxSpoolBytes, MinMaxSpoolBytes, int64(MaxMaxSpoolBytes))
	}
	ps = append(ps, a.credentialProblems("audit.", opts)...)
	if f := a.Feed; f != nil {
		if msg := bindingURLProblem(f.URL); msg != "" {
			add("feed.url", "%s", msg)
		} else if f.URL == a.URL {
			add("feed.url", "is audit.url: the feed is a second repository, each event would be delivered twice to one")
		}
		if msg := spoolDirProblem(f.SpoolDir, "feed", opts); msg != "" {
			add("feed.spool_dir", "%s", msg)
		}
		ps = append(ps, f.credentialProblems("audit.feed.", opts)...)
	}
	sortProblems(ps)
	return ps
}

// bindingURLProblem is what is wrong with a binding's base URL, or "". The URL is
// never logged or reported with credentials, so it may not carry any.
func bindingURLProblem(raw string) string {
	if raw == "" {
		return "is required"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("%q must be an absolute http or https URL", raw)
	case u.User != nil:
		return "must not carry credentials: name a bearer_token_file or a client certificate"
	case u.RawQuery != "" || u.Fragment != "":
		return "must be a FHIR base, without a query or a fragment"
	}
	return ""
}

// spoolDirProblem is what is wrong with a spool directory, or "". The spool is
// <dir>/<sub>; unless opts.SkipFiles, it (or the nearest folder of it that exists) is
// stat-ed and its writability asked, as serve's creating it would find, but it is not
// created or read here: `config check` must not touch a running gateway's spool.
func spoolDirProblem(dir, sub string, opts Options) string {
	switch {
	case dir == "":
		return "is required with destination = \"repository\""
	case !filepath.IsAbs(dir):
		return fmt.Sprintf("%q must be an absolute path", dir)
	case filepath.Clean(dir) == "/":
		return "must not be the root directory"
	case len(dir) > MaxTerminationMessagePathBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxTerminationMessagePathBytes)
	case !opts.SkipFiles:
		return dirProblem(dir, sub)
	}
	return ""
}

// credentialProblems checks the credential files (unless opts.SkipFiles) with the readers the
// binding's client uses, so that `config check` and serve refuse the same files.
func (c Credentials) credentialProblems(prefix string, opts Options) []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: prefix + key, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case (c.ClientCertificateFile == "") != (c.ClientKeyFile == ""):
		key := "client_key_file"
		if c.ClientCertificateFile == "" {
			key = "client_certificate_file"
		}
		add(key, "is required with %s: a client certificate needs both files", map[string]string{
			"client_key_file": prefix + "client_certificate_file", "client_certificate_file": prefix + "client_key_file"}[key])
	case c.ClientCertificateFile != "" && !opts.SkipFiles:
		if _, err := ReadKeyPair(prefix+"client_certificate_file", c.ClientCertificateFile, prefix+"client_key_file", c.ClientKeyFile); err != nil {
			ps = append(ps, fileProblem(prefix+"client_certificate_file", err))
		}
	}
	if c.CAFile != "" && !opts.SkipFiles {
		if _, err := ReadCertPool(prefix+"ca_file", c.CAFile); err != nil {
			ps = append(ps, fileProblem(prefix+"ca_file", err))
		}
	}
	if c.BearerTokenFile != "" && !opts.SkipFiles {
		if _, err := ReadBearerToken(prefix+"bearer_token_file", c.BearerTokenFile); err != nil {
			ps = append(ps, fileProblem(prefix+"bearer_token_file", err))
		}
	}
	return ps
}

// ReadBearerToken reads the bearer token file key names: at most MaxBearerTokenBytes,
// surrounding whitespace trimmed, not empty, one line of visible ASCII. The error is a
// *FileError naming key.
func ReadBearerToken(key, path string) (string, error) {
	data, err := ReadFile(key, path, MaxBearerTokenBytes)
	if err != nil {
		return "", err
	}
	tok := string(bytes.TrimSpace(data))
	switch {
	case tok == "":
		return "", &FileError{Key: key, Err: fmt.Errorf("%s is empty", path)}
	case strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		return "", &FileError{Key: key, Err: fmt.Errorf("%s holds more than one token, or characters a header cannot carry", path)}
	}
	return tok, nil
}
