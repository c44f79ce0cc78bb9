package controlplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/netcube/netcube/internal/testenv"
)

// operator is a netcube-operator process against the test API server.
type operator struct {
	kubeconfig, log string
	cmd             *exec.Cmd
}

// startOperator starts netcube-operator with kubeconfig's credentials
// and waits until it answers /healthz; it stops when the test ends.
func startOperator(t *testing.T, kubeconfig string, extra ...string) *operator {
	t.Helper()
	o := &operator{kubeconfig: kubeconfig, log: filepath.Join(t.TempDir(), "operator.log")}
	logf, err := os.Create(o.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	healthz := freeAddr(t)
	o.cmd = exec.Command(filepath.Join(binDir, "netcube-operator"), append([]string{"--kubeconfig", kubeconfig,
		"--namespace", "kube-system", "--identity", "operator-" + t.Name(), "--healthz-bind-address", healthz}, extra...)...)
	o.cmd.Stdout, o.cmd.Stderr = logf, logf
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if o.cmd.ProcessState == nil {
			_ = o.cmd.Process.Signal(syscall.SIGTERM)
			_ = o.cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(o.log)
			t.Logf("operator log:\n%s", b)
		}
	})
	a := &agent{}
	testenv.WaitFor(t, 10*time.Second, "operator up", func() bool { return a.get("/healthz", healthz) == "ok" })
	return o
}

// saKubeconfig writes a kubeconfig holding a token of ServiceAccount
// kube-system/name (bound to no Pod) and returns its path.
func saKubeconfig(t *testing.T, name string) string {
	t.Helper()
	tok, err := env.Client.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.URL, CertificateAuthority: filepath.Join(env.Dir, "ca.crt")}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientFor is a client with kubeconfig's credentials.
func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
