/* device_main.c - moonwarp-device, the process that holds a runtime's CUDA context (see
 * device_link.h); the library starts it, one per cuda runtime. */
int mw__device_main(int argc, char **argv);

int main(int argc, char **argv) { return mw__device_main(argc, argv); }
