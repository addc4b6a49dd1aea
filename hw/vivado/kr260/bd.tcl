# Block design "kv" of the KR260 overlay (sourced by kr260/build.tcl, after package_ip.tcl's IP
# repository is on ip_repo_paths; needs the cfg array of CONFIG.tcl).
#
#   Zynq UltraScale+ PS  --M_AXI_HPM0_FPD--> SmartConnect --M00--> kv_engine_top_0 (s_axil)
#                                                          \-M01--> xxv_ethernet_0 (s_axi_0)
#   SFP+ cage <-> xxv_ethernet_0 (10GBASE-R, GTH) --axis_rx_0--> kv_engine_top_0 --> axis_tx_0
#
# One clock domain for the data path: kv_engine_top_0 runs on the MAC's user clock tx_clk_out_0
# (156.25 MHz; 64 bit x 156.25 MHz = 10 Gb/s), which also clocks the MAC's receive FIFO
# (rx_core_clk_0), so neither stream crosses a clock. The PS side runs on pl_clk0 (100 MHz); the
# SmartConnect (two clocks) crosses the AXI4-Lite into the MAC clock for kv_engine_top_0.
# Interface and pin names of xxv_ethernet follow AMD PG210 (10G/25G Ethernet Subsystem 4.1);
# they were not checked by a Vivado run (docs/vivado.md).

create_bd_design kv

# --- cells ------------------------------------------------------------------------------
set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:zynq_ultra_ps_e:3.5 zynq_ultra_ps_e_0]
apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e -config {apply_board_preset "1"} $ps
set_property -dict [list \
    CONFIG.PSU__USE__M_AXI_GP0 {1} \
    CONFIG.PSU__USE__M_AXI_GP1 {0} \
    CONFIG.PSU__USE__M_AXI_GP2 {0} \
    CONFIG.PSU__MAXIGP0__DATA_WIDTH {32} \
    CONFIG.PSU__FPGA_PL0_ENABLE {1} \
    CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {100} \
] $ps

set eth [create_bd_cell -type ip -vlnv xilinx.com:ip:xxv_ethernet:4.1 xxv_ethernet_0]
set_property -dict [list \
    CONFIG.LINE_RATE {10} \
    CONFIG.NUM_OF_CORES {1} \
    CONFIG.BASE_R_KR {BASE-R} \
    CONFIG.DATA_PATH_INTERFACE {AXI Stream} \
    CONFIG.INCLUDE_USER_FIFO {1} \
    CONFIG.INCLUDE_AXI4_INTERFACE {1} \
    CONFIG.INCLUDE_STATISTICS_COUNTERS {1} \
    CONFIG.GT_TYPE {GTH} \
    CONFIG.GT_REF_CLK_FREQ {156.25} \
    CONFIG.GT_DRP_CLK {100} \
    CONFIG.GT_GROUP_SELECT {Quad_X0Y1} \
    CONFIG.LANE1_GT_LOC {X0Y6} \
    CONFIG.ENABLE_PIPELINE_REG {1} \
] $eth

set kv [create_bd_cell -type ip -vlnv "$cfg(vendor):$cfg(library):$cfg(name):$cfg(version)" \
    $cfg(instance)]

set sc [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:1.0 smartconnect_0]
set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {2} CONFIG.NUM_CLKS {2}] $sc

set rst_ps [create_bd_cell -type ip -vlnv xilinx.com:ip:proc_sys_reset:5.0 rst_ps]
set rst_eth [create_bd_cell -type ip -vlnv xilinx.com:ip:proc_sys_reset:5.0 rst_eth]
# the MAC's user_tx_reset_0 is active high
set_property CONFIG.C_AUX_RESET_HIGH {1} $rst_eth

# constants: GT clock selects (3'b101: TXOUTCLKPMA / RXOUTCLKPMA as PG210 asks), tied-off
# resets and loopback, and the SFP+ transmitter enable (tx_disable_b high)
foreach {name width value} {
    const_outclksel 3 5
    const_zero1 1 0
    const_zero3 3 0
    const_one 1 1
} {
    set c [create_bd_cell -type ip -vlnv xilinx.com:ip:xlconstant:1.1 $name]
    set_property -dict [list CONFIG.CONST_WIDTH $width CONFIG.CONST_VAL $value] $c
}

# --- board ports (kr260/kv_kr260.xdc places them) ---------------------------------------
set refclk [create_bd_intf_port -mode Slave -vlnv xilinx.com:interface:diff_clock_rtl:1.0 sfp_mgt_refclk]
set_property CONFIG.FREQ_HZ 156250000 $refclk
create_bd_intf_port -mode Master -vlnv xilinx.com:interface:gt_rtl:1.0 sfp0
create_bd_port -dir O sfp0_tx_disable_b

# --- AXI4-Lite control ------------------------------------------------------------------
connect_bd_intf_net [get_bd_intf_pins zynq_ultra_ps_e_0/M_AXI_HPM0_FPD] [get_bd_intf_pins smartconnect_0/S00_AXI]
connect_bd_intf_net [get_bd_intf_pins smartconnect_0/M00_AXI] [get_bd_intf_pins $cfg(instance)/$cfg(axil)]
connect_bd_intf_net [get_bd_intf_pins smartconnect_0/M01_AXI] [get_bd_intf_pins xxv_ethernet_0/s_axi_0]

# --- Ethernet: SFP+ <-> MAC <-> kv ------------------------------------------------------
connect_bd_intf_net [get_bd_intf_ports sfp_mgt_refclk] [get_bd_intf_pins xxv_ethernet_0/gt_ref_clk]
connect_bd_intf_net [get_bd_intf_pins xxv_ethernet_0/gt_serial_port] [get_bd_intf_ports sfp0]
connect_bd_intf_net [get_bd_intf_pins xxv_ethernet_0/axis_rx_0] [get_bd_intf_pins $cfg(instance)/s_axis_rx]
connect_bd_intf_net [get_bd_intf_pins $cfg(instance)/m_axis_tx] [get_bd_intf_pins xxv_ethernet_0/axis_tx_0]
connect_bd_net [get_bd_pins const_one/dout] [get_bd_ports sfp0_tx_disable_b]

# --- clocks -----------------------------------------------------------------------------
# pl_clk0 (100 MHz): PS master port, SmartConnect slave side, MAC DRP and AXI4-Lite, PS reset
connect_bd_net [get_bd_pins zynq_ultra_ps_e_0/pl_clk0] \
    [get_bd_pins zynq_ultra_ps_e_0/maxihpm0_fpd_aclk] \
    [get_bd_pins smartconnect_0/aclk] \
    [get_bd_pins xxv_ethernet_0/dclk] \
    [get_bd_pins xxv_ethernet_0/s_axi_aclk_0] \
    [get_bd_pins rst_ps/slowest_sync_clk]
# tx_clk_out_0 (156.25 MHz): kv, the MAC's receive FIFO, SmartConnect master side to kv
connect_bd_net [get_bd_pins xxv_ethernet_0/tx_clk_out_0] \
    [get_bd_pins xxv_ethernet_0/rx_core_clk_0] \
    [get_bd_pins $cfg(instance)/$cfg(clock)] \
    [get_bd_pins smartconnect_0/aclk1] \
    [get_bd_pins rst_eth/slowest_sync_clk]

# --- resets -----------------------------------------------------------------------------
connect_bd_net [get_bd_pins zynq_ultra_ps_e_0/pl_resetn0] \
    [get_bd_pins rst_ps/ext_reset_in] [get_bd_pins rst_eth/ext_reset_in]
connect_bd_net [get_bd_pins rst_ps/interconnect_aresetn] [get_bd_pins smartconnect_0/aresetn]
connect_bd_net [get_bd_pins rst_ps/peripheral_aresetn] [get_bd_pins xxv_ethernet_0/s_axi_aresetn_0]
connect_bd_net [get_bd_pins rst_ps/peripheral_reset] [get_bd_pins xxv_ethernet_0/sys_reset]
# kv leaves reset when the PS has and the MAC's transmit side is out of reset
connect_bd_net [get_bd_pins xxv_ethernet_0/user_tx_reset_0] [get_bd_pins rst_eth/aux_reset_in]
connect_bd_net [get_bd_pins rst_eth/peripheral_reset] [get_bd_pins $cfg(instance)/$cfg(reset)]

# --- MAC tie-offs (configuration goes through s_axi_0) -----------------------------------
connect_bd_net [get_bd_pins const_outclksel/dout] \
    [get_bd_pins xxv_ethernet_0/txoutclksel_in_0] [get_bd_pins xxv_ethernet_0/rxoutclksel_in_0]
connect_bd_net [get_bd_pins const_zero1/dout] \
    [get_bd_pins xxv_ethernet_0/rx_reset_0] [get_bd_pins xxv_ethernet_0/tx_reset_0] \
    [get_bd_pins xxv_ethernet_0/gtwiz_reset_rx_datapath_0] \
    [get_bd_pins xxv_ethernet_0/gtwiz_reset_tx_datapath_0] \
    [get_bd_pins xxv_ethernet_0/pm_tick_0]
connect_bd_net [get_bd_pins const_zero3/dout] [get_bd_pins xxv_ethernet_0/gt_loopback_in_0]

# --- addresses (manifest): kv at the start of the HPM0_FPD window, the MAC's registers after it ---
assign_bd_address
set_property offset $cfg(addr_base) [get_bd_addr_segs zynq_ultra_ps_e_0/Data/SEG_$cfg(instance)_regs]
set_property range $cfg(addr_range) [get_bd_addr_segs zynq_ultra_ps_e_0/Data/SEG_$cfg(instance)_regs]
set_property offset $cfg(mac_base) [get_bd_addr_segs zynq_ultra_ps_e_0/Data/SEG_xxv_ethernet_0_Reg]
set_property range $cfg(mac_range) [get_bd_addr_segs zynq_ultra_ps_e_0/Data/SEG_xxv_ethernet_0_Reg]

validate_bd_design
save_bd_design
