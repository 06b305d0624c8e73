package gatewayspec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Validate is the Go side of admission: the CEL rules' Go twins (whole milliseconds,
// config exclusivity), gateway/lifecycle on the pod's budgets, and then the gateway's own
// `config check` on the ferrofed.toml rendered from the spec and its inline
// configuration. It returns the problems as field errors, and as warnings lifecycle's,
// the recorded drains', the audit spool's and those of `config check` (an open data
// plane among them).
//
// A referenced ConfigMap is not read here: for a spec.config.configMapRef Validate is
// ValidateReferenced with nothing read, so the warnings of its content are not given
// (and nothing of it is refused). Of the Gateway it reads the name, the spec and
// status.drains only: the webhook decodes nothing else (internal/webhook's
// admittedGateway).
func Validate(g *ferrofedv1alpha1.Gateway) (field.ErrorList, []string) {
	return ValidateReferenced(g, nil)
}

// ReadConfig reads the configuration a spec.config.configMapRef names: the value of
// key in the ConfigMap name of the Gateway's namespace, or why it could not be read.
type ReadConfig func(name, key string) ([]byte, error)

// ValidateReferenced is Validate, and for a Gateway whose configuration is a
// spec.config.configMapRef the warnings of that configuration, read with read (nil:
// not read) once the spec has no problem of its own: the same warnings as of an inline
// configuration (the audit spool's, the final sync's budget, `config check`'s such as
// an open data plane), computed by the same functions (checkUser). Nothing of a
// referenced configuration is refused at admission: the ConfigMap can change after it
// and the controller checks it before any rollout (condition ConfigValid). A
// configuration that could not be read draws one warning saying why; one that does
// not pass `config check`, one warning with its problems.
func ValidateReferenced(g *ferrofedv1alpha1.Gateway, read ReadConfig) (field.ErrorList, []string) {
	s := &g.Spec
	plan := Plan(s)
	errs := validateMilliseconds(s)
	errs = append(errs, validateTLS(s.TLS)...)
	errs = append(errs, validateTracing(s.Tracing)...)
	errs = append(errs, validateAuditAndMounts(s)...)
	errs = append(errs, validateAutoscaling(s)...)
	errs = append(errs, ValidateLifecycle(s)...)
	cfgPath := field.NewPath("spec", "config")
	if c := s.Config; c != nil && c.Inline != nil && c.ConfigMapRef != nil {
		errs = append(errs, field.Invalid(cfgPath, "inline and configMapRef",
			"spec.config.inline and spec.config.configMapRef are mutually exclusive: set one of them"))
	}
	if c := s.Config; c != nil && c.Inline != nil && len(*c.Inline) > ferrofedv1alpha1.MaxInlineConfigBytes {
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooLong, Field: cfgPath.Child("inline").String(), BadValue: "<value omitted>",
			Detail: fmt.Sprintf("may not be more than %d bytes; it has %d", ferrofedv1alpha1.MaxInlineConfigBytes, len(*c.Inline))})
	}
	warnings := append(LifecycleWarnings(s), drainWarnings(g.Status.Drains)...)
	if len(errs) > 0 {
		// The rendered configuration would only restate these problems in TOML keys.
		return errs, warnings
	}
	if c := s.Config; c != nil && c.ConfigMapRef != nil {
		return errs, append(warnings, referencedWarnings(s, plan, c.ConfigMapRef, read)...)
	}
	var user []byte
	if s.Config != nil && s.Config.Inline != nil {
		user = []byte(*s.Config.Inline)
	}
	more, err := checkUser(s, plan, user)
	if err != nil {
		errs = append(errs, configErrors(cfgPath.Child("inline"), err)...)
	}
	return errs, append(warnings, more...)
}

// checkUser renders and checks the user's configuration user (inline, or of a
// configMapRef) with the spec: its problems, and its warnings, those of `config
// check` (configWarnings) and of the audit spools it configures (auditWarnings), the
// latter even with problems. The one place both kinds of configuration are warned of.
func checkUser(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, user []byte) ([]string, error) {
	// Before go-toml decodes it (MountsOf, Render): a document of many unknown keys is
	// refused in one pass over it, as the rendered file's check would refuse it.
	if err := config.CheckUnknownKeys(user, "spec.config"); err != nil {
		return nil, err
	}
	m := config.MountsOf(user)
	var warnings []string
	_, cfg, err := renderAndCheck(s, plan, user, m, nil)
	if err == nil {
		warnings = configWarnings(cfg)
	}
	return append(warnings, auditWarnings(s, plan, m.AuditSpools)...), err
}

// referencedWarnings are the warnings of the configuration ref names, read with read
// (nil: not read, no warning): checkUser's, or one saying why it could not be read or
// checked. Never a refusal.
func referencedWarnings(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, ref *ferrofedv1alpha1.ConfigMapKeyRef, read ReadConfig) []string {
	if read == nil {
		return nil
	}
	key := ref.Key
	if key == "" {
		key = ferrofedv1alpha1.DefaultConfigMapKey
	}
	where := fmt.Sprintf("spec.config.configMapRef (ConfigMap %s, key %q)", ref.Name, key)
	user, err := read(ref.Name, key)
	if err != nil {
		return []string{fmt.Sprintf("%s could not be read for warnings: %v; "+
			"the warnings of its content (the audit spool, spec.lifecycle.bindingsDrainTimeout, an open data plane) are not given, and the Gateway's ConfigValid condition says whether the operator can use it",
			where, err)}
	}
	warnings, err := checkUser(s, plan, user)
	if err != nil {
		msg := ConfigMessage(err)
		if lines := strings.Split(msg, "\n"); len(lines) > 1+MaxReferencedWarningProblems {
			// A warning is a line of a client's output: the condition lists the rest.
			msg = strings.Join(lines[:1+MaxReferencedWarningProblems], "\n") +
				fmt.Sprintf("\n  and %d more problem(s), in the ConfigValid condition", len(lines)-1-MaxReferencedWarningProblems)
		}
		warnings = append([]string{fmt.Sprintf("%s does not pass config check, so the operator rolls out nothing of it (condition ConfigValid=False, reason %s): %s",
			where, ferrofedv1alpha1.ReasonInvalidConfig, msg)}, warnings...)
	}
	return warnings
}

// MaxReferencedWarningProblems is the most problems of a referenced configuration its
// warning lists.
const MaxReferencedWarningProblems = 10

// configWarnings are the warnings of `config check` on the rendered file, which the
// gateway logs at every start and reload (an open data plane, a token sent in clear
// with allow_insecure): each names its key, without the line numbers of a file no one
// edits.
func configWarnings(cfg *config.Config) []string {
	var out []string
	for _, w := range cfg.Warnings() {
		w.Line = 0
		out = append(out, "spec.config: "+w.String())
	}
	return out
}

// PersistentSpoolSyncThreshold is the bindingsDrainTimeout under which a Gateway with a
// persistent spool draws a warning: step 4 of the drain syncs and closes the spool, and
// with a claim that outlives the pod the next owner (the replica again, or a hand-over
// Job) reads what that sync wrote (docs/audit-spool.md, "On Kubernetes").
const PersistentSpoolSyncThreshold = 2 * time.Second

// auditWarnings are the warnings of a configuration with spools audit spools: a
// bindingsDrainTimeout too short for the spools' final sync, and what an emptyDir
// spool loses with its pod.
func auditWarnings(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, spools int) []string {
	if spools == 0 {
		// Only called with the configuration known (checkUser): its [audit] is.
		if s.PersistentSpool() {
			return []string{"spec.audit.spool.volumeClaimTemplate is set but the configuration has no [audit] table with destination \"repository\": " +
				"every replica gets a claim with no spool in it, and a claim's hand-over (ferrofed audit drain) fails without one, keeping the claim; remove the template, or add the table"}
		}
		return nil
	}
	if s.PersistentSpool() {
		var out []string
		if plan.BindingsDrainTimeout < PersistentSpoolSyncThreshold {
			out = append(out, fmt.Sprintf(
				"spec.lifecycle.bindingsDrainTimeout (%s) leaves less than %s for the audit spool's final sync at shutdown: with a persistent spool (spec.audit.spool.volumeClaimTemplate) the claim's next owner reads what that sync wrote; raise it to at least %s",
				plan.BindingsDrainTimeout, PersistentSpoolSyncThreshold, PersistentSpoolSyncThreshold))
		}
		if s.ReplicasOrDefault() == 1 {
			out = append(out, "spec.replicas is 1 with a persistent spool (spec.audit.spool.volumeClaimTemplate): a rollout replaces the one pod in place, since its successor needs its claim, so the Gateway answers nothing while the pod restarts; run 2 or more replicas")
		}
		return out
	}
	var out []string
	if plan.BindingsDrainTimeout < time.Second {
		out = append(out, fmt.Sprintf(
			"spec.lifecycle.bindingsDrainTimeout (%s) leaves less than 1s for the audit spool's final sync at shutdown: raise it to at least 1s",
			plan.BindingsDrainTimeout))
	}
	limit := s.SpoolSizeLimit()
	out = append(out, fmt.Sprintf(
		"the audit spool is an emptyDir (spec.audit.spool, %s): it survives container restarts but not the pod's deletion; records a deleted pod has not delivered are lost, counted in its drain's log line and in ferrofed_audit_undelivered_at_exit; spec.audit.spool.volumeClaimTemplate keeps them in a claim per replica",
		limit.String()))
	return out
}

// The CEL rules of the audit spool and of secretMounts, word for word.
const (
	sizeLimitMessage      = "spec.audit.spool.sizeLimit must be from 4Mi to 128Gi"
	spoolExclusiveMessage = "spec.audit.spool.sizeLimit and spec.audit.spool.volumeClaimTemplate are mutually exclusive: sizeLimit sizes the emptyDir spool, volumeClaimTemplate replaces it with a persistent claim per replica; set one of them"
	accessModesMessage    = "spec.audit.spool.volumeClaimTemplate.spec.accessModes must be set, each ReadWriteOnce or ReadWriteOncePod: a spool has one writer, its own replica"
	claimStorageMessage   = "spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage is required, from 4Mi to 128Gi"
	mountPathMessage      = "mountPath must be a directory under /etc/ferrofed/secrets/, with no . or .. segment, no // and no trailing /"
	duplicateMountMessage = "spec.secretMounts: two entries have the same mountPath"
)

// validateAuditAndMounts is the Go twin of the CEL rules on spec.audit and
// spec.secretMounts.
func validateAuditAndMounts(s *ferrofedv1alpha1.GatewaySpec) field.ErrorList {
	var errs field.ErrorList
	if s.Audit != nil && s.Audit.Spool != nil && s.Audit.Spool.SizeLimit != nil {
		q := *s.Audit.Spool.SizeLimit
		if q.Cmp(ferrofedv1alpha1.MinAuditSpoolSizeLimit) < 0 || q.Cmp(ferrofedv1alpha1.MaxAuditSpoolSizeLimit) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "audit", "spool", "sizeLimit"), q.String(), sizeLimitMessage))
		}
	}
	errs = append(errs, validateSpoolClaim(s)...)
	path := field.NewPath("spec", "secretMounts")
	if len(s.SecretMounts) > ferrofedv1alpha1.MaxSecretMounts {
		errs = append(errs, field.TooMany(path, len(s.SecretMounts), ferrofedv1alpha1.MaxSecretMounts))
	}
	seen := map[string]bool{}
	for i, m := range s.SecretMounts {
		if !mountPathValid(m.MountPath) {
			errs = append(errs, field.Invalid(path.Index(i).Child("mountPath"), m.MountPath, mountPathMessage))
		}
		if seen[m.MountPath] {
			errs = append(errs, field.Invalid(path, m.MountPath, duplicateMountMessage))
		}
		seen[m.MountPath] = true
	}
	return errs
}

// validateSpoolClaim is the Go twin of the CEL rules on spec.audit.spool: sizeLimit and
// volumeClaimTemplate exclusive, the template's access modes and storage request.
func validateSpoolClaim(s *ferrofedv1alpha1.GatewaySpec) field.ErrorList {
	if s.Audit == nil || s.Audit.Spool == nil || s.Audit.Spool.VolumeClaimTemplate == nil {
		return nil
	}
	path := field.NewPath("spec", "audit", "spool")
	var errs field.ErrorList
	if s.Audit.Spool.SizeLimit != nil {
		errs = append(errs, field.Invalid(path, "sizeLimit and volumeClaimTemplate", spoolExclusiveMessage))
	}
	spec := path.Child("volumeClaimTemplate", "spec")
	var modes []corev1.PersistentVolumeAccessMode
	if t := s.Audit.Spool.VolumeClaimTemplate; t.Spec != nil {
		modes = t.Spec.AccessModes
	}
	ok := len(modes) > 0
	for _, m := range modes {
		ok = ok && (m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod)
	}
	if !ok {
		errs = append(errs, field.Invalid(spec.Child("accessModes"), modes, accessModesMessage))
	}
	q, has := s.SpoolClaimStorage()
	if !has || q.Cmp(ferrofedv1alpha1.MinAuditSpoolSizeLimit) < 0 || q.Cmp(ferrofedv1alpha1.MaxAuditSpoolSizeLimit) > 0 {
		errs = append(errs, field.Invalid(spec.Child("resources"), q.String(), claimStorageMessage))
	}
	return errs
}

func mountPathValid(p string) bool {
	rest, ok := strings.CutPrefix(p, SecretMountsDir)
	if !ok || rest == "" || strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// RenderAndCheck renders ferrofed.toml from the spec's plan and user, the rest of the
// configuration, and runs `config check` on it: what the webhook and the controller
// both call, so that they refuse the same documents.
func RenderAndCheck(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, user []byte) ([]byte, error) {
	return renderUser(s, plan, user, nil)
}

// renderUser is RenderAndCheck with operator (nil: none) appended to the issuers.
func renderUser(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, user []byte, operator *config.Issuer) ([]byte, error) {
	if err := config.CheckUnknownKeys(user, "spec.config"); err != nil { // before go-toml decodes it, as Validate
		return nil, err
	}
	rendered, _, err := renderAndCheck(s, plan, user, config.MountsOf(user), operator)
	return rendered, err
}

// RenderForPolling is RenderAndCheck with the operator's issuer appended to the
// user's [[auth.issuers]] (OperatorIssuer): what the operator rolls out while it polls
// the Gateway's pods. Admission checks the configuration without it, so that a data
// plane's need for an issuer of its own is not met by the operator's.
//
// keyID names the issuer's key in a closing comment: a new key changes the rendered
// file, and so its hash, which rolls the pods onto the new key set.
func RenderForPolling(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, user []byte, is config.Issuer, keyID string) ([]byte, error) {
	rendered, err := renderUser(s, plan, user, &is)
	if err != nil {
		return nil, err
	}
	return append(rendered, "# The operator's issuer key: "+keyID+"\n"...), nil
}

// renderAndCheck is RenderAndCheck with the mounts of user read already; it returns
// the checked configuration too, for its warnings.
func renderAndCheck(s *ferrofedv1alpha1.GatewaySpec, plan lifecycle.Plan, user []byte, m config.Mounts, operator *config.Issuer) ([]byte, *config.Config, error) {
	spools := m.AuditSpools
	owned := Owned(s, plan)
	owned.Audit = AuditOwned(spools)
	owned.StoredQueries = StoredQueriesOwned(m.StoredQueries)
	owned.ReservedIssuer = OperatorIssuerID
	if operator != nil {
		owned.Issuers = []config.Issuer{*operator}
	}
	rendered, err := config.Render(owned, user)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ParseRendered(rendered)
	if err != nil {
		return nil, nil, err
	}
	if err := spoolProblems(s, cfg); err != nil {
		return nil, nil, err
	}
	return rendered, cfg, nil
}

// ConfigMessage is the text of a configuration problem list, as the ConfigValid
// condition and the webhook show it: one problem per line, each naming its key. Line
// numbers are left out, since they count lines of a rendered file no one edits.
func ConfigMessage(err error) string {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %d problem(s)", ps.Source, len(ps.List))
	for _, p := range ps.List {
		p.Line = 0
		msg += "\n  " + p.String()
	}
	return msg
}

// MaxConfigCauses is the most problems of a configuration the webhook lists, each a
// cause of its refusal; one more cause counts the rest. The refusal's message, which
// apimachinery builds of every cause, costs the square of their number.
const MaxConfigCauses = 200

func configErrors(path *field.Path, err error) field.ErrorList {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		return field.ErrorList{field.Invalid(path, "(omitted)", err.Error())}
	}
	out := make(field.ErrorList, 0, min(len(ps.List), MaxConfigCauses+1))
	for i, p := range ps.List {
		if i == MaxConfigCauses {
			out = append(out, field.Invalid(path, "(omitted)", fmt.Sprintf("and %d more problem(s), not listed", len(ps.List)-i)))
			break
		}
		p.Line = 0
		out = append(out, field.Invalid(path, p.Key, p.String()))
	}
	return out
}

func validateMilliseconds(s *ferrofedv1alpha1.GatewaySpec) field.ErrorList {
	l := s.Lifecycle
	path := field.NewPath("spec", "lifecycle")
	var errs field.ErrorList
	for _, d := range []struct {
		name  string
		value *metav1.Duration
	}{
		{"requestTimeout", l.RequestTimeout},
		{"drainDelay", l.DrainDelay},
		{"shutdownTimeout", l.ShutdownTimeout},
		{"bindingsDrainTimeout", l.BindingsDrainTimeout},
		{"terminationHeadroom", l.TerminationHeadroom},
	} {
		if d.value != nil && !wholeMilliseconds(d.value.Duration) {
			errs = append(errs, field.Invalid(path.Child(d.name), d.value.Duration.String(),
				fmt.Sprintf("spec.lifecycle.%s must be a whole number of milliseconds", d.name)))
		}
	}
	return errs
}

// drainWarnings warns, on an update, when a recent drain (status.drains) used more than
// 80 % of its pod's grace period: the next slower one may be killed mid-drain.
func drainWarnings(drains []ferrofedv1alpha1.DrainRecord) []string {
	var out []string
	for _, d := range drains {
		if d.GracePeriodSeconds <= 0 || d.DurationMilliseconds*10 <= d.GracePeriodSeconds*1000*8 {
			continue
		}
		out = append(out, fmt.Sprintf(
			"the drain of pod %s took %dms, %d%% of its %ds grace period: raise spec.lifecycle.terminationHeadroom (or terminationGracePeriodSeconds) before a slower drain is killed",
			d.Pod, d.DurationMilliseconds, d.DurationMilliseconds/(d.GracePeriodSeconds*10), d.GracePeriodSeconds))
		break // one warning names the problem; the status lists every drain
	}
	return out
}

// The CEL rules on TLS, word for word: the webhook refuses with the same messages.
const (
	clientCAWithoutIdentityMessage = "spec.tls.clientCASecret requires spec.tls.healthcheckIdentitySecret: with client certificates required the pod's probes run ferrofed healthcheck, which must present a client certificate the CA of spec.tls.clientCASecret accepts"
	identityWithoutClientCAMessage = "spec.tls.healthcheckIdentitySecret is only presented when spec.tls.clientCASecret requires client certificates: set spec.tls.clientCASecret too, or remove spec.tls.healthcheckIdentitySecret"
)

// validateTLS is the Go twin of TLS's CEL rules: a client CA and a healthcheck
// identity come together, since the exec probes present the identity.
func validateTLS(t *ferrofedv1alpha1.TLS) field.ErrorList {
	if t == nil {
		return nil
	}
	path := field.NewPath("spec", "tls", "healthcheckIdentitySecret")
	switch {
	case t.ClientCASecret != nil && t.HealthcheckIdentitySecret == nil:
		return field.ErrorList{field.Invalid(path, "", clientCAWithoutIdentityMessage)}
	case t.ClientCASecret == nil && t.HealthcheckIdentitySecret != nil:
		return field.ErrorList{field.Invalid(path, *t.HealthcheckIdentitySecret, identityWithoutClientCAMessage)}
	}
	return nil
}

// The CEL rules on spec.tracing, word for word, and their expressions (RE2 both sides).
const (
	tracingEndpointMessage    = "spec.tracing.endpoint must be an http or https base URL with a host and no credentials, query, fragment or whitespace, not ending in /v1/traces (the gateway appends it)"
	tracingRatioMessage       = "spec.tracing.samplingRatio must be a decimal string from 0 to 1 with at most 6 decimals, e.g. 0.25"
	tracingTimeoutMessage     = "spec.tracing.timeout must be greater than 0s and at most 60s"
	tracingCANeedsHTTPS       = "spec.tracing.caSecret needs an https spec.tracing.endpoint: the CA verifies the collector's certificate"
	tracingServiceNameMessage = "spec.tracing.serviceName must be printable ASCII and not only spaces"
)

var (
	tracingEndpointRE      = regexp.MustCompile(`^https?://[^/?#@[:space:]]+(/[^?#[:space:]]*)?$`)
	tracingEndpointTraces  = regexp.MustCompile(`/v1/traces/?$`)
	tracingRatioRE         = regexp.MustCompile(`^(0([.][0-9]{1,6})?|1([.]0{1,6})?)$`)
	tracingServiceNameRE   = regexp.MustCompile(`^[ -~]*[!-~][ -~]*$`)
	tracingEndpointMaxSize = 2048
)

// validateTracing is the Go twin of spec.tracing's CEL rules (and of its required
// endpoint), each refusal naming its field; the rendered [tracing] then goes through
// `config check` with the rest.
func validateTracing(t *ferrofedv1alpha1.Tracing) field.ErrorList {
	if t == nil {
		return nil
	}
	path := field.NewPath("spec", "tracing")
	var errs field.ErrorList
	switch {
	case t.Endpoint == "":
		errs = append(errs, field.Required(path.Child("endpoint"), "spec.tracing.endpoint is required: the OTLP/HTTP receiver's base URL"))
	case len(t.Endpoint) > tracingEndpointMaxSize:
		errs = append(errs, field.TooLong(path.Child("endpoint"), "<value omitted>", tracingEndpointMaxSize))
	case !tracingEndpointRE.MatchString(t.Endpoint) || tracingEndpointTraces.MatchString(t.Endpoint):
		errs = append(errs, field.Invalid(path.Child("endpoint"), t.Endpoint, tracingEndpointMessage))
	}
	if r := t.SamplingRatio; r != nil && !tracingRatioRE.MatchString(*r) {
		errs = append(errs, field.Invalid(path.Child("samplingRatio"), *r, tracingRatioMessage))
	}
	if d := t.Timeout; d != nil {
		switch {
		case d.Duration <= 0 || d.Duration > ferrofedv1alpha1.MaxTracingTimeout:
			errs = append(errs, field.Invalid(path.Child("timeout"), d.Duration.String(), tracingTimeoutMessage))
		case !wholeMilliseconds(d.Duration):
			errs = append(errs, field.Invalid(path.Child("timeout"), d.Duration.String(), "spec.tracing.timeout must be a whole number of milliseconds"))
		}
	}
	if t.CASecret != nil && !strings.HasPrefix(t.Endpoint, "https://") {
		errs = append(errs, field.Invalid(path.Child("caSecret"), t.CASecret.Name, tracingCANeedsHTTPS))
	}
	if n := t.ServiceName; n != nil && (len(*n) > config.MaxTracingServiceNameBytes || !tracingServiceNameRE.MatchString(*n)) {
		errs = append(errs, field.Invalid(path.Child("serviceName"), *n, tracingServiceNameMessage))
	}
	return errs
}
