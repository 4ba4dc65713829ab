#ifndef IBEACON_CBLUEZ_SHIM_H
#define IBEACON_CBLUEZ_SHIM_H
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/* The HCI ioctl request numbers are function-like macros (_IOW/_IOR), which Swift does not
   import; these constants carry their values. */
static const unsigned long ibeacon_HCIDEVUP = HCIDEVUP;
static const unsigned long ibeacon_HCIGETDEVLIST = HCIGETDEVLIST;
static const unsigned long ibeacon_HCIGETDEVINFO = HCIGETDEVINFO;
#endif
