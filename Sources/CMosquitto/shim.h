#ifndef IBEACON_CMOSQUITTO_SHIM_H
#define IBEACON_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#endif
