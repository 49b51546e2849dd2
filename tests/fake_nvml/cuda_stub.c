/* The fake driver's libcuda.so.<driver version>: a real shared object that exports nothing.
 *
 * It exists because tools that assemble a container's driver files (CDI spec generation, NVIDIA's
 * nvcdi) look for libcuda.so.<driver version> in the driver root next to libnvidia-ml.so.1; no
 * test runs CUDA on it, so it must not pretend to implement any CUDA entry point.
 */
static const char kubegpu_fake_libcuda[] __attribute__((used)) = "kubegpu fake libcuda: no CUDA here";
