package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// GPUResource is the resource FakeGPUs advertises.
const GPUResource = "nvidia.com/gpu"

// DevicePluginDir is the machine's /var/lib/kubelet/device-plugins, as
// the host sees it.
func (m *Machine) DevicePluginDir() string {
	return filepath.Join(m.Dir, Private["/var/lib/kubelet"], "device-plugins")
}

// FakeGPUs is a device plugin for a machine without GPUs: it advertises n
// devices of GPUResource to the machine's kubelet (registering once its
// kubelet's socket is there) until the test ends. A container given some
// gets NVIDIA_VISIBLE_DEVICES naming them, as the NVIDIA plugin's would;
// no device node is handed over.
func (m *Machine) FakeGPUs(t testing.TB, n int) {
	t.Helper()
	dir := m.DevicePluginDir()
	kubelet := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(kubelet); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("realnode: %s's kubelet has no device plugin socket", m.Name)
		}
	}
	const endpoint = "gridweave-fake-gpu.sock"
	socket := filepath.Join(dir, endpoint)
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	plugin := &fakeGPUPlugin{done: make(chan struct{})}
	for i := range n {
		plugin.devices = append(plugin.devices, &pluginapi.Device{ID: fmt.Sprintf("GPU-fake-%s-%d", m.Name, i), Health: pluginapi.Healthy})
	}
	pluginapi.RegisterDevicePluginServer(srv, plugin)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(plugin.done)
		srv.Stop()
		_ = os.Remove(socket)
	})
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: GPUResource,
	}); err != nil {
		t.Fatalf("realnode: register the fake GPUs with %s's kubelet: %v", m.Name, err)
	}
}

// fakeGPUPlugin is the device plugin service of FakeGPUs.
type fakeGPUPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	done    chan struct{}
}

func (p *fakeGPUPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *fakeGPUPlugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-stream.Context().Done():
	}
	return nil
}

func (p *fakeGPUPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := ""
		for i, id := range c.DevicesIds {
			if i > 0 {
				ids += ","
			}
			ids += id
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": ids}})
	}
	return out, nil
}

func (p *fakeGPUPlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
