package gatewayspec

import (
	"net"
	"strconv"

	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Where the pod finds its files. The Deployment mounts the rendered ConfigMap and the
// TLS Secret there; the rendered ferrofed.toml points at them.
const (
	ConfigDir      = "/etc/ferrofed"
	ConfigFileName = "ferrofed.toml"
	ConfigPath     = ConfigDir + "/" + ConfigFileName
	TLSDir         = ConfigDir + "/tls"
	TLSCertFile    = TLSDir + "/tls.crt"
	TLSKeyFile     = TLSDir + "/tls.key"
	// ClientCADir holds the key of spec.tls.clientCASecret, mounted as ClientCAFileName
	// whatever its key is called in the Secret.
	ClientCADir      = ConfigDir + "/client-ca"
	ClientCAFileName = "ca.crt"
	ClientCAFile     = ClientCADir + "/" + ClientCAFileName
	// HealthcheckIdentityDir holds tls.crt and tls.key of
	// spec.tls.healthcheckIdentitySecret, what `ferrofed healthcheck` presents.
	HealthcheckIdentityDir      = ConfigDir + "/healthcheck"
	HealthcheckIdentityCertFile = HealthcheckIdentityDir + "/tls.crt"
	HealthcheckIdentityKeyFile  = HealthcheckIdentityDir + "/tls.key"
	// PageTokenDir holds the key every replica of a Gateway authenticates its paging
	// tokens with: the operator's Secret "<name>-page-token", key PageTokenKey.
	PageTokenDir     = ConfigDir + "/page-token"
	PageTokenKey     = "key"
	PageTokenKeyFile = PageTokenDir + "/" + PageTokenKey
	// TerminationMessagePath is the gateway container's terminationMessagePath and its
	// server.termination_message_path: the drain's outcome, which the kubelet copies
	// into the pod's status for the operator.
	TerminationMessagePath = "/dev/termination-log"
	// AuditSpoolDir is where the audit spool emptyDir (spec.audit.spool) is mounted,
	// rendered as audit.spool_dir and audit.feed.spool_dir.
	AuditSpoolDir = "/var/lib/ferrofed/audit"
	// SecretMountsDir is the directory every spec.secretMounts mountPath is under.
	SecretMountsDir = ConfigDir + "/secrets/"
	// StoredQueriesDir is where a Gateway's pods find its stored queries: the operator
	// mounts the ConfigMap StoredQueriesConfigMapName there (read-only) and renders it as
	// stored_queries.dir when the Gateway's configuration has a [stored_queries] table.
	StoredQueriesDir = ConfigDir + "/stored-queries"
	// TracingHeadersDir holds the key of spec.tracing.headersSecret, mounted as
	// TracingHeadersFileName whatever its key is called in the Secret, and rendered as
	// tracing.headers_file.
	TracingHeadersDir      = ConfigDir + "/tracing-headers"
	TracingHeadersFileName = "headers"
	TracingHeadersFile     = TracingHeadersDir + "/" + TracingHeadersFileName
	// TracingCADir holds the key of spec.tracing.caSecret, mounted as
	// TracingCAFileName, and rendered as tracing.ca_file.
	TracingCADir      = ConfigDir + "/tracing-ca"
	TracingCAFileName = "ca.crt"
	TracingCAFile     = TracingCADir + "/" + TracingCAFileName
)

// The operator's issuer, rendered into a Gateway's configuration while the operator
// polls its pods (docs/operator.md, "The operator reads its pods"): a read_only
// [[auth.issuers]] entry after the user's, its key set a key of the rendered
// ConfigMap mounted at OperatorJWKSFile.
const (
	OperatorIssuerID    = "urn:ferrofed:operator"
	OperatorIssuerScope = "ferrofed.operator.read"
	OperatorJWKSKey     = "operator-issuer-jwks.json"
	OperatorJWKSDir     = ConfigDir + "/operator-issuer"
	OperatorJWKSFile    = OperatorJWKSDir + "/jwks.json"
)

// OperatorAudience is the aud of the operator's tokens for one Gateway: a token for
// one is refused by every other.
func OperatorAudience(namespace, name string) string {
	return "urn:ferrofed:gateway:" + namespace + "/" + name
}

// OperatorIssuer is the [[auth.issuers]] entry of the operator's issuer for the
// Gateway namespace/name.
func OperatorIssuer(namespace, name string) config.Issuer {
	return config.Issuer{Issuer: OperatorIssuerID, Audience: OperatorAudience(namespace, name), JWKSFile: OperatorJWKSFile,
		OperatorScope: OperatorIssuerScope, Algorithms: []string{"ES256"}, ReadOnly: true}
}

// tracingField is the field an inline [tracing] is refused in favour of when
// spec.tracing is set: "tracing: is set by the Gateway from spec.tracing; ...".
const tracingField = "spec.tracing"

// PageTokenSecretName is the Secret of a Gateway's page-token key.
func PageTokenSecretName(gatewayName string) string { return gatewayName + "-page-token" }

// StoredQueriesConfigMapName is the ConfigMap a Gateway's StoredQuery resources are
// rendered into, one key <id>.json per stored query.
func StoredQueriesConfigMapName(gatewayName string) string { return gatewayName + "-stored-queries" }

// ownedFields are the ferrofed.toml keys a Gateway sets from its spec, each with the
// field to use instead. A table key ("server.tls") owns everything under it.
var ownedFields = map[string]string{
	"server.listen":                           "spec.port",
	"server.base_path":                        "spec.basePath",
	"server.request_timeout_ms":               "spec.lifecycle.requestTimeout",
	"server.drain_delay_ms":                   "spec.lifecycle.drainDelay",
	"server.shutdown_timeout_ms":              "spec.lifecycle.shutdownTimeout",
	"server.bindings_drain_timeout_ms":        "spec.lifecycle.bindingsDrainTimeout",
	"server.termination_grace_period_seconds": "spec.lifecycle.terminationGracePeriodSeconds",
	"server.tls":                              "spec.tls (secretName, and clientCASecret with healthcheckIdentitySecret for client certificates)",
	"server.termination_message_path":         "the pod's terminationMessagePath, where the kubelet reads each drain's outcome for the Gateway's status",
	"federation.page_token_key_file":          "every replica reads the key of the Secret <name>-page-token the operator makes for the Gateway",
	"audit.spool_dir":                         "spec.audit.spool: the operator mounts the spool volume (an emptyDir, or a claim per replica) at " + AuditSpoolDir,
	"audit.feed.spool_dir":                    "spec.audit.spool: the operator mounts the spool volume (an emptyDir, or a claim per replica) at " + AuditSpoolDir,
	"stored_queries.dir":                      "StoredQuery resources naming the Gateway: the operator mounts their ConfigMap <name>-stored-queries at " + StoredQueriesDir,
}

// StoredQueriesOwned is the part of [stored_queries] the operator renders when the
// user's configuration has the table (config.HasStoredQueries): the directory the
// StoredQuery ConfigMap is mounted at.
func StoredQueriesOwned(enabled bool) config.StoredQueries {
	if !enabled {
		return config.StoredQueries{}
	}
	return config.StoredQueries{Dir: StoredQueriesDir}
}

// AuditOwned is the part of [audit] the operator renders for spools spools
// (config.AuditSpools of the user's configuration): the directory of its emptyDir.
func AuditOwned(spools int) config.Audit {
	var a config.Audit
	if spools > 0 {
		a.SpoolDir = AuditSpoolDir
	}
	if spools > 1 {
		a.Feed = &config.AuditFeed{SpoolDir: AuditSpoolDir}
	}
	return a
}

// Owned is the part of ferrofed.toml the spec sets, with plan's budgets in
// milliseconds and the grace period the pod gets: config.Render merges it with the
// rest of the configuration (inline or from the referenced ConfigMap).
func Owned(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan) config.Owned {
	server := config.Server{
		Listen:                        net.JoinHostPort("", strconv.Itoa(int(s.PortOrDefault()))), // ":<port>": dual-stack (config.Server.Listen)
		BasePath:                      s.BasePathOrDefault(),
		RequestTimeoutMS:              ptr.To(plan.RequestTimeout.Milliseconds()),
		DrainDelayMS:                  ptr.To(plan.DrainDelay.Milliseconds()),
		ShutdownTimeoutMS:             ptr.To(plan.ShutdownTimeout.Milliseconds()),
		BindingsDrainTimeoutMS:        ptr.To(plan.BindingsDrainTimeout.Milliseconds()),
		TerminationGracePeriodSeconds: ptr.To(plan.GracePeriodSeconds),
		// Where the drain writes its outcome: the container's terminationMessagePath.
		TerminationMessagePath: TerminationMessagePath,
	}
	if s.TLS != nil {
		server.TLS = config.TLS{CertificateFile: TLSCertFile, KeyFile: TLSKeyFile}
		if s.TLS.ClientCASecret != nil {
			server.TLS.ClientCAFile = ClientCAFile
		}
		if s.TLS.HealthcheckIdentitySecret != nil {
			server.TLS.HealthcheckIdentityFile = HealthcheckIdentityCertFile
			server.TLS.HealthcheckIdentityKeyFile = HealthcheckIdentityKeyFile
		}
	}
	// Every replica reads one key, so that a next link made by one is accepted by all.
	owned := config.Owned{Server: server, Federation: config.Federation{PageTokenKeyFile: PageTokenKeyFile}, Fields: ownedFields}
	if s.Tracing != nil {
		owned.Tracing = TracingOwned(s.Tracing)
		owned.Fields = make(map[string]string, len(ownedFields)+1)
		for k, v := range ownedFields {
			owned.Fields[k] = v
		}
		owned.Fields["tracing"] = tracingField
	}
	return owned
}

// TracingOwned is the [tracing] table of spec.tracing: its files at the paths the
// operator mounts their Secrets' keys at. A samplingRatio the CRD's rule refuses is
// left out here (Validate refuses it).
func TracingOwned(t *ferrofedv1alpha1.Tracing) *config.Tracing {
	out := &config.Tracing{Endpoint: t.Endpoint, ServiceName: ptr.Deref(t.ServiceName, "")}
	if t.SamplingRatio != nil {
		if r, err := strconv.ParseFloat(*t.SamplingRatio, 64); err == nil {
			out.SamplingRatio = &r
		}
	}
	if t.Timeout != nil {
		out.TimeoutMS = ptr.To(t.Timeout.Milliseconds())
	}
	if t.HeadersSecret != nil {
		out.HeadersFile = TracingHeadersFile
	}
	if t.CASecret != nil {
		out.CAFile = TracingCAFile
	}
	return out
}

// ParseRendered runs the gateway's own `config check` (config.Parse, without the checks
// that read files, which live in the pod) on a rendered ferrofed.toml.
func ParseRendered(rendered []byte) (*config.Config, error) {
	return config.Parse(rendered, "rendered ferrofed.toml", config.Options{SkipFiles: true})
}
