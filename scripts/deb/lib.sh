# Shared by scripts/deb/*.sh: the Debian-root toolkit (scripts/debian/root.sh: clean roots made by
# mmdebstrap and cached in DEB_CACHE, chroots into them), its messages prefixed "deb:".
ROOT_LOG=deb
# shellcheck source=scripts/debian/root.sh
source "$(dirname "${BASH_SOURCE[0]}")/../debian/root.sh"
