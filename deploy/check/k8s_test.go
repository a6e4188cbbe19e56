package check

import (
	"math"
	"net"
	"path"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"execd/internal/config"
)

// Memory figures the manifests are sized with (statefulset.yaml explains the
// sum; deploy/README.md, "Sizing memory", has the measurements): execd's own
// footprint with both guests compiled, one idle JavaScript and one idle
// Python interpreter per workspace before they are trimmed, a sandbox
// growing to limits.max_memory_mib (memory is not copied as it grows), and
// execd's heap while one workspace grown that far is saved or restored.
const (
	baseMiB              = 170
	idleWorkspaceMiB     = 0.7 + 3.8
	growthPeakFactor     = 1
	imageTransientFactor = 4
)

// pod is everything the checks read from the manifests at once.
type pod struct {
	ms        []manifest
	sts       *appsv1.StatefulSet
	spec      *corev1.PodSpec
	c         *corev1.Container
	cfg       config.Config
	cfgSet    map[string]bool
	configCM  *corev1.ConfigMap
	configArg string
}

func loadPod(t *testing.T) pod {
	t.Helper()
	ms := loadManifests(t)
	sts := only[appsv1.StatefulSet](t, ms, "execd")
	spec := &sts.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	c := &spec.Containers[0]
	p := pod{ms: ms, sts: sts, spec: spec, c: c}
	args := c.Args
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-config" {
			p.configArg = args[i+1]
		}
	}
	if p.configArg == "" {
		t.Fatalf("container args %q have no -config FILE", args)
	}
	// The config file must come from a ConfigMap mounted at its directory.
	vol, sub := p.mountFor(t, p.configArg)
	if vol.ConfigMap == nil {
		t.Fatalf("%s is not on a ConfigMap volume", p.configArg)
	}
	p.configCM = only[corev1.ConfigMap](t, ms, vol.ConfigMap.Name)
	text, ok := p.configCM.Data[sub]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %q for %s", p.configCM.Name, sub, p.configArg)
	}
	p.cfg, p.cfgSet = loadConfig(t, "ConfigMap "+p.configCM.Name, text)
	return p
}

// mountFor returns the volume mounted at the directory holding file, and the
// file's path below the mount.
func (p pod) mountFor(t *testing.T, file string) (*corev1.Volume, string) {
	t.Helper()
	var best *corev1.VolumeMount
	for i, m := range p.c.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") || file == m.MountPath {
			if best == nil || len(m.MountPath) > len(best.MountPath) {
				best = &p.c.VolumeMounts[i]
			}
		}
	}
	if best == nil {
		t.Fatalf("%s is on no volume mount of the container", file)
	}
	if best.SubPath != "" {
		t.Fatalf("%s is mounted with subPath, which never sees updates", best.MountPath)
	}
	for i := range p.spec.Volumes {
		if p.spec.Volumes[i].Name == best.Name {
			return &p.spec.Volumes[i], strings.TrimPrefix(strings.TrimPrefix(file, best.MountPath), "/")
		}
	}
	for _, vct := range p.sts.Spec.VolumeClaimTemplates {
		if vct.Name == best.Name {
			return &corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vct.Name}}}, ""
		}
	}
	t.Fatalf("mount %s names volume %q, which is not defined", best.MountPath, best.Name)
	return nil, ""
}

func (p pod) mountPath(t *testing.T, dir string) *corev1.VolumeMount {
	t.Helper()
	for i, m := range p.c.VolumeMounts {
		if path.Clean(m.MountPath) == path.Clean(dir) {
			return &p.c.VolumeMounts[i]
		}
	}
	t.Fatalf("no volume is mounted at %s", dir)
	return nil
}

func (p pod) listenPort(t *testing.T) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(p.cfg.Server.Listen)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func (p pod) containerPort(t *testing.T, name string) int32 {
	t.Helper()
	for _, cp := range p.c.Ports {
		if cp.Name == name {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container has no port named %q", name)
	return 0
}

func TestManifestsDecodeStrictly(t *testing.T) {
	ms := loadManifests(t)
	if len(ms) < 4 {
		t.Fatalf("want at least 4 objects in deploy/k8s, got %d", len(ms))
	}
	for _, m := range ms {
		if errs := validation.IsDNS1123Subdomain(objectName(m.obj)); len(errs) > 0 {
			t.Errorf("%s: name %q: %v", m.file, objectName(m.obj), errs)
		}
	}
}

// The validator itself must refuse what a cluster would refuse or drop.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	bad := map[string]string{
		"misspelt field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n",
		"wrong type":     "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: {name: mcp}}\n",
		"bad quantity": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n" +
			"      containers: [{name: x, resources: {limits: {memory: 3 GiB}}}]\n",
		"duplicate key": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"unknown kind":  "apiVersion: v1\nkind: Pdo\nmetadata: {name: x}\n",
	}
	for name, doc := range bad {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestConfigMapIsAValidExecdConfig(t *testing.T) {
	p := loadPod(t)
	if p.configArg != "/etc/execd/config.toml" {
		t.Errorf("-config %s; the image and the docs use /etc/execd/config.toml", p.configArg)
	}
	if a := p.cfg.Server.AdminListen; a != "" {
		_, port, _ := net.SplitHostPort(a)
		if n, _ := strconv.Atoi(port); int32(n) != p.containerPort(t, "admin") {
			t.Errorf("server.admin_listen %s is not the container port named admin", a)
		}
		if int32(mustAtoi(t, port)) == p.listenPort(t) {
			t.Error("the admin listener shares the MCP port")
		}
	}
}

func TestListenerNeedsAuthFromTheSecret(t *testing.T) {
	p := loadPod(t)
	host, _, _ := net.SplitHostPort(p.cfg.Server.Listen)
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		t.Fatalf("server.listen %s: probes and the Service cannot reach a loopback listener", p.cfg.Server.Listen)
	}
	if p.cfg.Server.AuthTokensFile == "" {
		t.Fatal("server.auth_tokens_file is empty on a non-loopback listener (SECURITY.md)")
	}
	vol, key := p.mountFor(t, p.cfg.Server.AuthTokensFile)
	if vol.Secret == nil {
		t.Fatalf("%s is not on a Secret volume", p.cfg.Server.AuthTokensFile)
	}
	if vol.Secret.SecretName != "execd-tokens" || key != "tokens" {
		t.Errorf("tokens file is Secret %q key %q; the docs create execd-tokens with key tokens", vol.Secret.SecretName, key)
	}
	if len(vol.Secret.Items) > 0 {
		projected := false
		for _, it := range vol.Secret.Items {
			projected = projected || it.Path == key
		}
		if !projected {
			t.Errorf("Secret items do not project %q", key)
		}
	}
	if m := vol.Secret.DefaultMode; m == nil || *m&0o007 != 0 {
		t.Errorf("Secret defaultMode %v: tokens must not be world-readable", m)
	}
	if p.spec.SecurityContext == nil || p.spec.SecurityContext.FSGroup == nil {
		t.Error("no fsGroup: the non-root user could not read the 0440 Secret")
	}
}

func TestDataAndCacheDirsAreVolumes(t *testing.T) {
	p := loadPod(t)
	data := p.mountPath(t, p.cfg.Workspace.DataDir)
	var claim bool
	for _, vct := range p.sts.Spec.VolumeClaimTemplates {
		if vct.Name == data.Name {
			claim = true
			if q := vct.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
				t.Error("volume claim for data_dir requests no storage")
			}
		}
	}
	if !claim {
		t.Errorf("workspace.data_dir %s is not on a volume claim template", p.cfg.Workspace.DataDir)
	}
	if data.ReadOnly {
		t.Error("data_dir is mounted read-only")
	}
	cache := p.mountPath(t, p.cfg.Sandbox.CacheDir)
	if cache.ReadOnly {
		t.Error("cache_dir is mounted read-only")
	}
	if !p.cfgSet["sandbox.cache_dir"] || !p.cfgSet["workspace.data_dir"] {
		t.Error("data_dir and cache_dir must be set explicitly: their defaults follow $HOME, which the image does not have")
	}
}

func TestProbesUseHealthz(t *testing.T) {
	p := loadPod(t)
	port := p.containerPort(t, "mcp")
	if port != p.listenPort(t) {
		t.Fatalf("container port mcp %d, execd listens on %s", port, p.cfg.Server.Listen)
	}
	for name, pr := range map[string]*corev1.Probe{"liveness": p.c.LivenessProbe, "readiness": p.c.ReadinessProbe, "startup": p.c.StartupProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s probe: want an httpGet on /healthz", name)
			continue
		}
		if pr.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe path %q, want /healthz", name, pr.HTTPGet.Path)
		}
		if pr.HTTPGet.Port != intstr.FromString("mcp") && pr.HTTPGet.Port != intstr.FromInt32(port) {
			t.Errorf("%s probe port %s is not execd's listener", name, pr.HTTPGet.Port.String())
		}
	}
}

func TestTerminationGraceCoversShutdown(t *testing.T) {
	p := loadPod(t)
	g := p.spec.TerminationGracePeriodSeconds
	need := stopBudget(p.cfg)
	if g == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	if float64(*g) <= need.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d must exceed shutdown_grace + interrupt_grace + %s = %s", *g, httpCloseWait, need)
	}
}

func TestSecurityContext(t *testing.T) {
	p := loadPod(t)
	ps := p.spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Error("pod must run as a non-root numeric user")
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile must be RuntimeDefault")
	}
	cs := p.c.SecurityContext
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if cs == nil || cs.Capabilities == nil || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" || len(cs.Capabilities.Add) > 0 {
		t.Error("capabilities: drop ALL, add none")
	}
	if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken must be false: execd never calls the API")
	}
}

func TestResourcesFitTheConfig(t *testing.T) {
	p := loadPod(t)
	req, lim := p.c.Resources.Requests, p.c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := req[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := lim[r]; !ok {
			t.Errorf("no %s limit", r)
		}
		if q, l := req[r], lim[r]; q.Cmp(l) > 0 {
			t.Errorf("%s request %s above limit %s", r, q.String(), l.String())
		}
	}
	// Go sees the node's CPUs in a container: max_concurrent_runs must be set
	// and must not exceed the CPU limit.
	if !p.cfgSet["limits.max_concurrent_runs"] {
		t.Error("limits.max_concurrent_runs is not set: its default is the node's CPU count, not the pod's")
	}
	cpu := lim[corev1.ResourceCPU]
	if runs := p.cfg.Limits.MaxConcurrentRuns; float64(runs) > math.Ceil(cpu.AsApproximateFloat64()) {
		t.Errorf("max_concurrent_runs %d above the CPU limit %s", runs, cpu.String())
	}
	mib := func(q resource.Quantity) float64 { return q.AsApproximateFloat64() / (1 << 20) }
	idle := baseMiB + float64(p.cfg.Workspace.MaxWorkspaces)*idleWorkspaceMiB
	peaks := (float64(p.cfg.Limits.MaxConcurrentRuns)*growthPeakFactor + imageTransientFactor) * float64(p.cfg.Limits.MaxMemoryMiB)
	if r := mib(req[corev1.ResourceMemory]); r < idle {
		t.Errorf("memory request %.0f MiB below base + idle interpreters = %.0f MiB", r, idle)
	}
	if l := mib(lim[corev1.ResourceMemory]); l < idle+peaks {
		t.Errorf("memory limit %.0f MiB below base + idle interpreters + growth peaks and an image's save = %.0f MiB", l, idle+peaks)
	}
}

func TestPublicServiceExposesOnlyMCP(t *testing.T) {
	p := loadPod(t)
	labels := p.sts.Spec.Template.Labels
	for k, v := range p.sts.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("StatefulSet selector %s=%s does not match the pod template", k, v)
		}
	}
	if only[corev1.Service](t, p.ms, p.sts.Spec.ServiceName).Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %s is not a headless Service", p.sts.Spec.ServiceName)
	}
	svc := only[corev1.Service](t, p.ms, "execd")
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("Service selector %s=%s selects no execd pod", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service execd has %d ports; only the MCP port belongs there", len(svc.Spec.Ports))
	}
	sp := svc.Spec.Ports[0]
	if sp.TargetPort != intstr.FromString("mcp") && sp.TargetPort != intstr.FromInt32(p.listenPort(t)) {
		t.Errorf("Service targets port %s, not execd's MCP listener", sp.TargetPort.String())
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service type %s: keep it ClusterIP and put a TLS proxy in front", svc.Spec.Type)
	}
	for _, cp := range p.c.Ports {
		if cp.Name != "mcp" && cp.Name != "admin" {
			t.Errorf("container declares port %s besides mcp and admin", cp.Name)
		}
	}
}

// The admin listener has no auth: it gets a Service of its own, and the
// NetworkPolicy admits it only from a namespace selected by name.
func TestAdminPortIsInternal(t *testing.T) {
	p := loadPod(t)
	if p.cfg.Server.AdminListen == "" {
		t.Skip("no admin listener in the ConfigMap")
	}
	admin := only[corev1.Service](t, p.ms, "execd-admin")
	if admin.Spec.Type != corev1.ServiceTypeClusterIP || len(admin.Spec.Ports) != 1 || admin.Spec.Ports[0].TargetPort != intstr.FromString("admin") {
		t.Errorf("Service execd-admin: type %s, ports %v; want one ClusterIP port targeting admin", admin.Spec.Type, admin.Spec.Ports)
	}
	np := only[networkingv1.NetworkPolicy](t, p.ms, "execd")
	admitted := false
	for _, r := range np.Spec.Ingress {
		for _, port := range r.Ports {
			if port.Port == nil || *port.Port != intstr.FromString("admin") {
				continue
			}
			admitted = true
			if len(r.From) == 0 {
				t.Error("the admin port is admitted from everywhere")
			}
			for _, f := range r.From {
				if f.NamespaceSelector == nil || f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "" || f.IPBlock != nil {
					t.Errorf("the admin port is admitted from %+v; want one namespace by name", f)
				}
			}
		}
	}
	if !admitted {
		t.Error("the NetworkPolicy does not admit the admin port at all (Prometheus cannot scrape)")
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNetworkPolicyAdmitsOnlyMCPAndNoEgress(t *testing.T) {
	p := loadPod(t)
	np := only[networkingv1.NetworkPolicy](t, p.ms, "execd")
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if p.sts.Spec.Template.Labels[k] != v {
			t.Errorf("NetworkPolicy selects %s=%s, not the execd pods", k, v)
		}
	}
	var ingress, egress bool
	for _, pt := range np.Spec.PolicyTypes {
		ingress = ingress || pt == networkingv1.PolicyTypeIngress
		egress = egress || pt == networkingv1.PolicyTypeEgress
	}
	if !ingress || !egress {
		t.Fatalf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 0 {
		t.Errorf("egress rules %v: execd needs none", np.Spec.Egress)
	}
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 {
			t.Error("an ingress rule admits every port")
		}
		for _, port := range r.Ports {
			if port.Port != nil && *port.Port == intstr.FromString("admin") && len(r.From) > 0 {
				continue // TestAdminPortIsInternal
			}
			if port.Port == nil || (*port.Port != intstr.FromString("mcp") && *port.Port != intstr.FromInt32(p.listenPort(t))) {
				t.Errorf("ingress admits port %v besides MCP", port.Port)
			}
		}
	}
}
