# KR260 pins of the pynq-kv overlay (block design ports of kr260/bd.tcl).
# Part xck26-sfvc784-2LV-c. SFP+ cage on the K26 SOM's GTH lane DP2 (SOM240_2 connector), its
# 156.25 MHz reference clock from U90 on GTH_REFCLK0 (KR260 carrier schematic / user guide UG1092).

# SFP+ serial lane (gt_rtl interface port sfp0)
set_property PACKAGE_PIN T2 [get_ports {sfp0_grx_p[0]}]
set_property PACKAGE_PIN T1 [get_ports {sfp0_grx_n[0]}]
set_property PACKAGE_PIN R4 [get_ports {sfp0_gtx_p[0]}]
set_property PACKAGE_PIN R3 [get_ports {sfp0_gtx_n[0]}]

# 156.25 MHz MGT reference clock (diff_clock_rtl interface port sfp_mgt_refclk)
set_property PACKAGE_PIN Y6 [get_ports sfp_mgt_refclk_clk_p]
set_property PACKAGE_PIN Y5 [get_ports sfp_mgt_refclk_clk_n]
create_clock -period 6.400 -name sfp_mgt_refclk [get_ports sfp_mgt_refclk_clk_p]

# SFP+ transmitter enable (active-low disable), static
set_property -dict {PACKAGE_PIN Y10 IOSTANDARD LVCMOS18 SLEW SLOW DRIVE 8} [get_ports sfp0_tx_disable_b]
set_false_path -to [get_ports sfp0_tx_disable_b]

set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
