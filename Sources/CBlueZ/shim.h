#ifndef IBEACON_CBLUEZ_SHIM_H
#define IBEACON_CBLUEZ_SHIM_H
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/* The HCI ioctl request numbers are function-like macros (_IOW/_IOR), which Swift does not
   import; these constants carry their values. */
static const unsigned long ibeacon_HCIDEVUP = HCIDEVUP;
static const unsigned long ibeacon_HCIGETDEVLIST = HCIGETDEVLIST;
static const unsigned long ibeacon_HCIGETDEVINFO = HCIGETDEVINFO;
static const unsigned long ibeacon_HCIGETCONNLIST = HCIGETCONNLIST;

/* prctl(2) is variadic, which Swift does not import: PR_SET_CHILD_SUBREAPER through a fixed
   signature. Orphaned descendants are then reparented to this process instead of init. */
static inline int ibeacon_set_child_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL); }

/* A hook's process must not inherit ibeacon's capabilities (the systemd units give
   CAP_NET_ADMIN as an ambient capability, which survives exec). Both act on the calling thread
   only (Linux keeps credentials per thread): ibeacon calls them on a thread made for one spawn,
   whose child is created with that thread's credentials. prctl(2) is variadic and capset(2)
   has no glibc wrapper, hence these fixed signatures. */
static inline int ibeacon_clear_ambient_capabilities(void) {
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL);
}
static inline int ibeacon_drop_thread_capabilities(void) {
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
    return (int)syscall(SYS_capset, &header, data);
}

/* glibc 2.34+ has it, but declares it only for _GNU_SOURCE (__USE_MISC), which Swift's Glibc
   module is not built with: the same prototype, so the child closes every descriptor from
   `from` on before exec. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
#endif
