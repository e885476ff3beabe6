/*
 * notnvml.c — a shared object that loads fine and is not NVML at all (a
 * wrong SCOPEMETER_NVML_LIBRARY, a stub left by an image build).  The GPU
 * collector must say so in one line and go on.
 */
__attribute__((visibility("default"))) int not_nvml(void)
{
    return 42;
}
