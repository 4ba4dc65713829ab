#ifndef IBEACON_CBLUEZ_SHIM_H
#define IBEACON_CBLUEZ_SHIM_H
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <spawn.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/* The HCI ioctl request numbers are function-like macros (_IOW/_IOR), which Swift does not
   import; these constants carry their values. */
static const unsigned long ibeacon_HCIDEVUP = HCIDEVUP;
static const unsigned long ibeacon_HCIGETDEVLIST = HCIGETDEVLIST;
static const unsigned long ibeacon_HCIGETDEVINFO = HCIGETDEVINFO;

/* prctl(2) is variadic, which Swift does not import: PR_SET_CHILD_SUBREAPER through a fixed
   signature. Orphaned descendants are then reparented to this process instead of init. */
static inline int ibeacon_set_child_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL); }

/* glibc 2.34+ has it, but declares it only for _GNU_SOURCE (__USE_MISC), which Swift's Glibc
   module is not built with: the same prototype, so the child closes every descriptor from
   `from` on before exec. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
#endif
